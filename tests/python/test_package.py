"""CPU tests of the Python package: it imports without a GPU or torch, and
library errors become MkernelError with the library's message."""
import os
import time

import pytest

import mkernel


def test_imports_and_finds_the_library():
    assert mkernel.library_path.endswith("libmkernel.so")
    if os.environ.get("MK_EXPECT_INSTALLED"):  # tools/check_pip_install.sh
        assert "site-packages" in mkernel.__file__ and "site-packages" in mkernel.library_path


def test_print_config_lists_the_knobs():
    cfg = mkernel.print_config()
    for knob in ("MK_TIMEOUT_MS", "MK_RANKS_PER_NODE", "MK_NET"):
        assert knob in cfg


def test_unique_id_is_128_bytes_and_fresh():
    a, b = mkernel.get_unique_id(), mkernel.get_unique_id()
    assert len(a) == 128 and len(b) == 128 and a != b


def test_bad_rank_raises_with_the_library_message_before_anything_runs():
    uid = mkernel.get_unique_id()
    t0 = time.time()
    with pytest.raises(mkernel.MkernelError, match=r"rank 3 is outside \[0, 2\)"):
        mkernel.Communicator(3, 2, uid)
    assert time.time() - t0 < 2


def test_foreign_id_is_rejected():
    with pytest.raises(mkernel.MkernelError, match="unique id"):
        mkernel.Communicator(0, 2, bytes(128))
    with pytest.raises(mkernel.MkernelError, match="128 bytes"):
        mkernel.Communicator(0, 2, b"short")


def test_bad_knob_value_is_reported(monkeypatch):
    monkeypatch.setenv("MK_TIMEOUT_MS", "soon")
    with pytest.raises(mkernel.MkernelError, match="MK_TIMEOUT_MS='soon'"):
        mkernel.Communicator.from_env()


def test_import_does_not_pull_in_torch():
    import subprocess
    import sys
    code = "import sys, mkernel; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("m,n,k,pattern", [
    (64, 100, 64, "n must be a positive multiple of 64"),
    (64, 64, 96, "k must be a positive multiple of 64"),
    (0, 64, 64, "m must be >= 1"),
])
def test_gemm_rejects_bad_shapes_before_touching_the_gpu(m, n, k, pattern):
    # Fake, aligned device addresses: validation fails before any CUDA call.
    with pytest.raises(mkernel.MkernelError, match=pattern):
        mkernel.gemm_ptr(1 << 20, 2 << 20, 3 << 20, m, n, k)


def test_gemm_rejects_null_and_misaligned_pointers():
    with pytest.raises(mkernel.MkernelError, match="device pointers"):
        mkernel.gemm_ptr(0, 2 << 20, 3 << 20, 64, 64, 64)
    with pytest.raises(mkernel.MkernelError, match="16-byte aligned"):
        mkernel.gemm_ptr((1 << 20) + 2, 2 << 20, 3 << 20, 64, 64, 64)


def test_tensor_parallel_plans_reject_a_null_communicator():
    import ctypes
    from mkernel._lib import lib
    import mkernel._ops_c  # noqa: F401  (declares the op signatures)
    h = ctypes.c_void_p()
    for create in ("mk_ag_gemm_create", "mk_gemm_rs_create"):
        assert getattr(lib, create)(None, 256, 256, 256, 0, 0, ctypes.byref(h)) != 0
        assert b"comm or out is NULL" in lib.mk_last_error()
