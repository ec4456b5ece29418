"""For the CPU tests of mkernel's torch ops: torch, or a skip saying why where it is missing or older than the ops
need (torch.library.custom_op: 2.4 on; mkernel/_torch_req.py). tools/setup_test_python.sh gives .venv-test a newer
torch where the system's is older, unless MK_TEST_TORCH=0 or the disk is too small: then these skip."""
import pytest


def torch_ops():
    """torch, with mkernel's op modules importable; else the calling test, or test module where called at its top,
    skips, saying why."""
    __tracebackhide__ = True  # (the skip names the caller)
    torch = pytest.importorskip("torch")
    try:
        import mkernel._torch_req  # noqa: F401
    except ImportError as ex:
        pytest.skip(str(ex), allow_module_level=True)
    return torch
