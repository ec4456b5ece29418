"""For the CPU tests that trace with fake CUDA tensors (FakeTensorMode, device="cuda"): torch before 2.5 needs a
CUDA driver to view one (a slice raises "CUDA driver version is insufficient"; autograd.Function.apply on one
aborts the process), so on a machine without a GPU those tests skip there, saying why; torch 2.5 on needs none."""
import functools

import pytest


@functools.lru_cache(maxsize=None)
def _why_not(torch):
    """None where a fake CUDA tensor can be viewed here, else the first line of torch's error."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    try:
        with FakeTensorMode():
            torch.empty(4, 4, device="cuda")[:2, 1:]
    except RuntimeError as ex:
        return str(ex).splitlines()[0]
    return None


def need_fake_cuda(torch):
    """Skips the calling test where this torch's fake CUDA tensors need a driver that is not here."""
    why = _why_not(torch)
    if why:
        pytest.skip(f"torch {torch.__version__} cannot view a fake CUDA tensor without a CUDA driver ({why}); "
                    "torch >= 2.5 can, and a GPU machine runs these with any torch")
