"""For the CPU tests that trace with fake CUDA tensors (FakeTensorMode, device="cuda"): some torch versions need a
CUDA driver to view one (2.4.1, 2.5.1 and 2.7.1 do: a slice raises "CUDA driver version is insufficient", and
2.4.1's autograd.Function.apply on one aborts the process; 2.11.0 does not), so on a machine without a GPU those
tests skip there, saying why."""
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
        if "driver" not in str(ex):  # (another failure is the test's to show, not a reason to skip)
            return None
        return str(ex).splitlines()[0]
    return None


def need_fake_cuda(torch):
    """Skips the calling test where this torch's fake CUDA tensors need a driver that is not here."""
    why = _why_not(torch)
    if why:
        pytest.skip(f"torch {torch.__version__} cannot view a fake CUDA tensor without a CUDA driver ({why}); "
                    "a newer torch (2.11) can, and where a driver is they run")


def skip_if_driver_needed(torch, ex):
    """In a test's `except RuntimeError as ex:` around a call on fake CUDA tensors: skips, as need_fake_cuda, where
    `ex` is this torch's need for a driver (the probe failing too), and returns otherwise (the caller re-raises)."""
    if "driver" in str(ex) and _why_not(torch):
        need_fake_cuda(torch)

