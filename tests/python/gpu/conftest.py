"""Fixtures of the GPU tests."""
import pytest


@pytest.fixture
def workspace_spy(monkeypatch):
    """spy(module) -> list: the bytes of every workspace module.capture_workspace hands out from then on (a
    call inside a CUDA-graph capture gets one from the graph's pool; mkernel/ops.py)."""
    def spy(module):
        seen = []
        real = module.capture_workspace

        def recording(*args, **kw):
            got = real(*args, **kw)
            seen.append(got[1])
            return got

        monkeypatch.setattr(module, "capture_workspace", recording)
        return seen
    return spy
