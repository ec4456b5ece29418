"""Fixtures of the GPU tests, and the rule for when they may skip."""
import os

import pytest


def pytest_sessionstart(session):
    """The modules here skip where torch sees no CUDA GPU. That is right on a machine without an NVIDIA driver (the
    CPU machine, CI), not on a GPU machine where torch cannot use the GPU (a CPU-only torch, a driver older than
    torch's CUDA): there the run fails, saying why, as mk_gpu_tests does (tests/gpu/gpu_main.cpp). A
    CUDA_VISIBLE_DEVICES that hides every GPU on purpose ('' or -1) still skips."""
    try:
        import torch
    except ImportError:
        return  # (the modules skip, saying so)
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1")
    if os.path.exists("/proc/driver/nvidia/version") and not hidden and not torch.cuda.is_available():
        pytest.exit(f"an NVIDIA driver is loaded, but torch {torch.__version__} (CUDA {torch.version.cuda}) sees no "
                    "CUDA GPU: a CPU-only torch, or a driver older than that CUDA; the GPU tests would all skip",
                    returncode=1)


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
