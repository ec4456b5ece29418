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
    code = "import sys, mkernel, mkernel._tp_meta; print('torch' in sys.modules)"
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


# The torch-free half of the tensor-parallel ops (mkernel/_tp_meta.py): shape
# rules the eager calls and the fake (torch.compile) implementations share, and
# the communicator registry behind the custom ops' int key.

def test_tp_shape_rules_give_output_shapes():
    from mkernel import _tp_meta as m
    assert m.ag_gemm_shapes((256, 512), (320, 512), 2) == ((512, 320), (512, 512))
    assert m.ag_gemm_shapes((1, 64), (64, 64), 8) == ((8, 64), (8, 64))
    assert m.gemm_rs_shape((512, 384), (256, 384), 2) == (256, 256)
    assert m.all_gather_shape((100, 128), 4) == (400, 128)
    assert m.reduce_scatter_shape((1024, 192), 4) == (256, 192)
    m.check_grad_rows("ag_gemm", 256)


@pytest.mark.parametrize("call,pattern", [
    (lambda m: m.ag_gemm_shapes((256, 512), (320, 256), 2), r"b is \[320, 256\]; b must be \[n, 512\]"),
    (lambda m: m.ag_gemm_shapes((256, 512), (100, 512), 2),
     r"ag_gemm: n \(rows of b\) must be a positive multiple of 64 \(got 100\)"),
    (lambda m: m.ag_gemm_shapes((256, 96), (128, 96), 2),
     r"k \(columns of a_local and b\) must be a positive multiple of 64"),
    (lambda m: m.ag_gemm_shapes((0, 64), (64, 64), 2), "at least one row"),
    (lambda m: m.gemm_rs_shape((384, 128), (128, 128), 2),
     r"m \(rows of a\) \(384\) must split into 2 row blocks of a multiple of 128"),
    (lambda m: m.gemm_rs_shape((512, 128), (128, 64), 2), r"a is \[512, 128\] but b is \[128, 64\]"),
    (lambda m: m.gemm_rs_shape((16 * 128, 128), (128, 128), 16), "at most 8 ranks"),
    (lambda m: m.all_gather_shape((128, 32), 2),
     r"all_gather: k \(columns of a_local\) must be a positive multiple of 64"),
    (lambda m: m.reduce_scatter_shape((512, 100), 2),
     r"reduce_scatter: n \(columns of x\) must be a positive multiple"),
    (lambda m: m.reduce_scatter_shape((500, 128), 2), r"m \(rows of x\) \(500\) must split into 2 row blocks"),
    (lambda m: m.check_grad_rows("ag_gemm", 100),
     r"ag_gemm backward: .* rows per rank \(100\) to be a multiple of 128"),
])
def test_tp_shape_rules_reject_what_the_library_would(call, pattern):
    from mkernel import _tp_meta
    with pytest.raises(mkernel.MkernelError, match=pattern):
        call(_tp_meta)


def test_tp_registry_maps_keys_to_open_communicators_weakly():
    from mkernel import _tp_meta

    class FakeComm:  # what the registry reads of a mkernel.Communicator
        _h, _uid, world = 1, 10 ** 9, 4

    comm = FakeComm()
    key = _tp_meta.register(comm)
    assert key == 10 ** 9 and _tp_meta.register(comm) == key
    assert _tp_meta.lookup(key) is comm and _tp_meta.world(key) == 4
    comm._h = None  # closed
    with pytest.raises(mkernel.MkernelError, match="closed"):
        _tp_meta.lookup(key)
    with pytest.raises(mkernel.MkernelError, match="closed"):
        _tp_meta.register(comm)
    del comm  # the registry holds no reference
    with pytest.raises(mkernel.MkernelError, match=r"no communicator with key 1000000000 .*mkernel.tp.register"):
        _tp_meta.world(key)
    with pytest.raises(mkernel.MkernelError, match="not a mkernel.Communicator"):
        _tp_meta.register(object())
