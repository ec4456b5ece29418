"""CPU tests of the Python package: it imports without a GPU or torch, and
library errors become MkernelError with the library's message. Where torch is
installed (a CPU build does), also the tensor-parallel custom ops' fake (meta)
implementations, autograd formulas' shapes and argument checks, with a stand-in
communicator (no GPU, no library call); without torch those tests skip, saying so."""
import itertools
import re
import os
import time

import pytest

import mkernel
from fakecuda import need_fake_cuda, skip_if_driver_needed
from torchops import torch_ops


def test_imports_and_finds_the_library():
    assert mkernel.library_path.endswith("libmkernel.so")
    if os.environ.get("MK_EXPECT_INSTALLED"):  # tools/check_pip_install.sh
        assert "site-packages" in mkernel.__file__ and "site-packages" in mkernel.library_path


def test_an_old_torch_gets_a_clear_import_error():
    # torch.library.custom_op came with torch 2.4: an older one would fail in the op modules' decorators with an
    # AttributeError; the op modules check first (mkernel/_torch_req.py). The check alone, on stand-in modules.
    import types
    torch = pytest.importorskip("torch", reason="needs torch (the op modules import it)")
    if not hasattr(torch.library, "custom_op"):  # (this torch is such a one: the op modules say so)
        with pytest.raises(ImportError, match=r"torch >= 2\.4 .*this torch is " + re.escape(torch.__version__)):
            import mkernel.tp  # noqa: F401
        return
    from mkernel._torch_req import require_custom_op
    old = types.SimpleNamespace(__version__="2.3.1", library=types.SimpleNamespace())
    with pytest.raises(ImportError, match=r"torch >= 2.4 .*this torch is 2\.3\.1"):
        require_custom_op(old)
    require_custom_op(types.SimpleNamespace(__version__="2.4.0", library=types.SimpleNamespace(custom_op=None)))


def test_net_backends_names_the_library_s_backends_in_auto_order():
    got = mkernel.net_backends()
    assert got and got[-1] == "emu", got  # emu is always built
    assert got == [b for b in ("verbs", "fabric", "emu") if b in got], got  # known names, auto's order, once each


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


def test_a_closed_communicator_says_so():
    comm = mkernel.Communicator.__new__(mkernel.Communicator)
    comm._h = None  # as close() leaves it
    for call in (comm.barrier, comm.check, comm.info, comm.network_bytes_put, comm.symmetric_bytes,
                 lambda: comm.alloc_symmetric(64)):
        with pytest.raises(mkernel.MkernelError, match="this communicator is closed"):
            call()


def test_a_buffer_freed_after_its_communicator_closed_gives_its_handle_back(monkeypatch):
    # (the communicator's close freed the buffer; the library deletes the handle without reading a comm)
    calls = []
    monkeypatch.setattr(mkernel.lib, "mk_symm_free", lambda comm, h: calls.append((comm, h)) or 0)
    comm = mkernel.Communicator.__new__(mkernel.Communicator)
    comm._h = None  # closed
    buf = mkernel.SymmetricBuffer.__new__(mkernel.SymmetricBuffer)
    buf._comm, buf._h = comm, 1234
    buf.free()
    buf.free()  # (once only)
    assert calls == [(None, 1234)] and buf._h is None


def test_mk_library_that_is_not_a_file_is_an_import_error():
    # A typo in MK_LIBRARY must not load the package's other copy without a word.
    import os
    import subprocess
    import sys
    env = dict(os.environ, MK_LIBRARY="/nonexistent/libmkernel.so")
    r = subprocess.run([sys.executable, "-c", "import mkernel"], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "MK_LIBRARY=/nonexistent/libmkernel.so is not a file" in r.stderr, r.stderr


def test_mk_library_that_is_not_a_shared_library_is_an_import_error_naming_it(tmp_path):
    # ctypes.CDLL's bare OSError ("invalid ELF header") did not say that MK_LIBRARY chose the file.
    import subprocess
    import sys
    bad = tmp_path / "libmkernel.so"
    bad.write_text("not a shared library\n")
    env = dict(os.environ, MK_LIBRARY=str(bad))
    r = subprocess.run([sys.executable, "-c", "import mkernel"], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "ImportError" in r.stderr, r.stderr
    assert f"ImportError: mkernel: MK_LIBRARY={bad} could not be loaded" in r.stderr, r.stderr


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


def test_workspace_size_queries_check_their_arguments_and_follow_the_unit_knob(monkeypatch):
    from mkernel._ops_c import workspace_bytes
    with pytest.raises(mkernel.MkernelError, match="n must be a positive multiple of 64"):
        mkernel.gemm_workspace_bytes(1024, 100, 8192)
    with pytest.raises(mkernel.MkernelError, match="k must be a positive multiple of 64"):
        mkernel.gemm_workspace_bytes(1024, 256, 65)
    with pytest.raises(mkernel.MkernelError, match=r"at or below 2\^31 - 256 = 2147483392 \(m=2147483648"):
        mkernel.gemm_workspace_bytes(1 << 31, 256, 8192)
    dims = (1, 2048, 2048, 8, 8, 128)
    monkeypatch.delenv("MK_ATTN_UNITS", raising=False)
    assert workspace_bytes("mk_attention_workspace_bytes", "attention", *dims, 1, 0) == 8  # causal: claimed
    assert workspace_bytes("mk_attention_workspace_bytes", "attention", *dims, 0, 0) == 0  # no mask: static
    monkeypatch.setenv("MK_ATTN_UNITS", "static")
    assert workspace_bytes("mk_attention_workspace_bytes", "attention", *dims, 1, 0) == 0
    monkeypatch.setenv("MK_ATTN_UNITS", "claimed")
    assert workspace_bytes("mk_attention_workspace_bytes", "attention", *dims, 0, 0) == 8
    # A shape the call itself refuses is refused here too (any shape got its size before).
    for bad, what in (((-1, 2048, 2048, 8, 8, 128, 1, 0), "must be >= 1"), ((1, 2048, 2048, 8, 3, 128, 1, 0),
                      r"kv_heads \(3\) must divide heads \(8\)"), ((1, 2048, 2048, 8, 8, 96, 0, 0), "head_dim must be"),
                      ((1, 2048, 2048, 8, 8, 128, 1, -7), "num_ctas must be >= 0")):
        with pytest.raises(mkernel.MkernelError, match="attention_workspace_bytes: .*" + what):
            workspace_bytes("mk_attention_workspace_bytes", "attention", *bad)


def test_tensor_parallel_plans_reject_a_null_communicator():
    import ctypes
    from mkernel._lib import lib
    import mkernel._ops_c  # noqa: F401  (declares the op signatures)
    h = ctypes.c_void_p()
    for create in ("mk_ag_gemm_create", "mk_gemm_rs_create", "mk_gemm_ar_create"):
        assert getattr(lib, create)(None, 256, 256, 256, 0, 0, ctypes.byref(h)) != 0
        assert lib.mk_last_error() == b"mkernel: " + create.encode() + b": comm is NULL"  # (the function: session 55)
    assert lib.mk_gemm_ar_create_ex(None, 256, 256, 256, 0, 0, 0, ctypes.byref(h)) != 0
    assert lib.mk_last_error() == b"mkernel: mk_gemm_ar_create_ex: comm is NULL"


def test_network_byte_count_rejects_a_null_communicator():
    import ctypes
    from mkernel._lib import lib
    n = ctypes.c_uint64()
    assert lib.mk_comm_network_bytes_put(None, ctypes.byref(n)) != 0
    assert lib.mk_last_error() == b"mkernel: mk_comm_network_bytes_put: comm or out is NULL"


def test_symmetric_byte_count_rejects_a_null_communicator():
    import ctypes
    from mkernel._lib import lib
    n = ctypes.c_uint64()
    assert lib.mk_comm_symmetric_bytes(None, ctypes.byref(n)) != 0
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
    # GEMM+AllReduce and the all-reduce: the whole [m, n] on every rank, under gemm_rs's rules.
    assert m.gemm_ar_shape((512, 384), (256, 384), 2) == (512, 256)
    assert m.gemm_ar_shape((8 * 128, 64), (64, 64), 8) == (1024, 64)
    assert m.all_reduce_shape((1024, 192), 4) == (1024, 192)
    assert m.all_reduce_shape((256, 64), 1) == (256, 64)
    assert m.gemm_rs_shape((2, 64), (64, 64), 2) == (1, 64)      # down to one row per rank
    assert m.gemm_ar_shape((402, 64), (64, 64), 2) == (402, 64)   # shares ending inside a row-block


@pytest.mark.parametrize("call,pattern", [
    (lambda m: m.ag_gemm_shapes((256, 512), (320, 256), 2), r"b is \[320, 256\]; b must be \[n, 512\]"),
    (lambda m: m.ag_gemm_shapes((256, 512), (100, 512), 2),
     r"ag_gemm: n \(rows of b\) must be a positive multiple of 64 \(got 100\)"),
    (lambda m: m.ag_gemm_shapes((256, 96), (128, 96), 2),
     r"k \(columns of a_local and b\) must be a positive multiple of 64"),
    (lambda m: m.ag_gemm_shapes((0, 64), (64, 64), 2), "at least one row"),
    (lambda m: m.gemm_rs_shape((385, 128), (128, 128), 2),
     r"m \(rows of a\) \(385\) must split into 2 equal row blocks"),
    (lambda m: m.gemm_rs_shape((512, 128), (128, 64), 2), r"a is \[512, 128\] but b is \[128, 64\]"),
    (lambda m: m.gemm_rs_shape((16 * 128, 128), (128, 128), 16), "at most 8 ranks"),
    (lambda m: m.all_gather_shape((128, 32), 2),
     r"all_gather: k \(columns of a_local\) must be a positive multiple of 64"),
    (lambda m: m.reduce_scatter_shape((512, 100), 2),
     r"reduce_scatter: n \(columns of x\) must be a positive multiple"),
    (lambda m: m.reduce_scatter_shape((501, 128), 2), r"m \(rows of x\) \(501\) must split into 2 equal row blocks"),
    (lambda m: m.gemm_ar_shape((512, 128), (128, 64), 2), r"gemm_ar: a is \[512, 128\] but b is \[128, 64\]"),
    (lambda m: m.gemm_ar_shape((512, 128), (100, 128), 2),
     r"gemm_ar: n \(rows of b\) must be a positive multiple of 64 \(got 100\)"),
    (lambda m: m.gemm_ar_shape((512, 96), (128, 96), 2),
     r"gemm_ar: k_local \(columns of a and b\) must be a positive multiple of 64 \(got 96\)"),
    (lambda m: m.gemm_ar_shape((385, 128), (128, 128), 2),
     r"gemm_ar: m \(rows of a\) \(385\) must split into 2 equal row blocks"),
    (lambda m: m.gemm_ar_shape((0, 128), (128, 128), 2), r"gemm_ar: m \(rows of a\) \(0\) must split"),
    (lambda m: m.gemm_ar_shape((16 * 128, 128), (128, 128), 16), "gemm_ar: at most 8 ranks"),
    (lambda m: m.all_reduce_shape((512, 100), 2), r"all_reduce: n \(columns of x\) must be a positive multiple"),
    (lambda m: m.all_reduce_shape((501, 128), 2), r"all_reduce: m \(rows of x\) \(501\) must split into 2 equal row blocks"),
    (lambda m: m.all_reduce_shape((16 * 128, 128), 16), "all_reduce: at most 8 ranks"),
])
def test_tp_shape_rules_reject_what_the_library_would(call, pattern):
    from mkernel import _tp_meta
    with pytest.raises(mkernel.MkernelError, match=pattern):
        call(_tp_meta)


class FakeComm:
    """What the registry and the tensor-parallel ops read of a mkernel.Communicator (_h, _uid, world):
    no library, no GPU. A fresh key each (a live key's registry entry must name a live object)."""
    _uids = itertools.count(2 * 10 ** 9)

    def __init__(self, world=2, uid=None):
        self._h, self.world = 1, world
        self._uid = next(self._uids) if uid is None else uid


def test_tp_registry_maps_keys_to_open_communicators_weakly():
    from mkernel import _tp_meta

    comm = FakeComm(world=4, uid=10 ** 9)
    key = _tp_meta.register(comm)
    assert key == 10 ** 9 and _tp_meta.register(comm) == key
    assert _tp_meta.lookup(key) is comm and _tp_meta.world(key) == 4
    comm._h = None  # closed
    with pytest.raises(mkernel.MkernelError, match="closed"):
        _tp_meta.lookup(key)
    with pytest.raises(mkernel.MkernelError, match="closed"):
        _tp_meta.register(comm)
    del comm  # the registry holds no reference
    with pytest.raises(mkernel.MkernelError,
                       match=r"no communicator with key 1000000000 .*garbage-collected.*keep the communicator alive"):
        _tp_meta.world(key)
    with pytest.raises(mkernel.MkernelError, match="not a mkernel.Communicator"):
        _tp_meta.register(object())


def test_tp_registry_drops_the_entries_of_collected_communicators():
    # The registry kept a (dead weakref, world) entry for every communicator the process ever made: a job that
    # makes communicators over and over grew it without bound. An entry now goes with its communicator; a key
    # registered again for another object keeps that object's entry when the first one dies.
    import gc
    from mkernel import _tp_meta

    gc.collect()
    before = len(_tp_meta._COMMS)
    for _ in range(100):
        _tp_meta.register(FakeComm())
    gc.collect()
    assert len(_tp_meta._COMMS) == before
    first = FakeComm(world=2)
    key = _tp_meta.register(first)
    second = FakeComm(world=4, uid=key)  # (a test double may reuse a key; real communicators never do)
    assert _tp_meta.register(second) == key and _tp_meta.lookup(key) is second
    del first
    gc.collect()
    assert _tp_meta.lookup(key) is second and _tp_meta.world(key) == 4
    del second
    gc.collect()
    assert key not in _tp_meta._COMMS and len(_tp_meta._COMMS) == before
    with pytest.raises(mkernel.MkernelError, match=f"no communicator with key {key} .*garbage-collected"):
        _tp_meta.world(key)


def test_communicator_keys_carry_the_world_size_so_compiled_graphs_differ_between_world_sizes():
    """torch.compile's on-disk caches find compiled code by the traced graph, in which the key is a
    constant: the n-th communicator of a process must get the same key at the same world size (the
    cache still serves a rerun) and another key at another (code traced at 4 ranks, with 4-rank
    output shapes, once ran in an 8-rank job)."""
    import subprocess
    import sys
    code = "import mkernel._tp_meta as m; print(m.new_key({w}), m.new_key({w}))"
    keys = {}
    for w in (1, 2, 4, 8, 4):
        r = subprocess.run([sys.executable, "-c", code.format(w=w)], capture_output=True, text=True, check=True)
        first, second = map(int, r.stdout.split())
        assert first != second
        keys.setdefault(w, set()).add((first, second))
    assert keys[4] == {next(iter(keys[4]))}, "the same world size gives the same keys in every process"
    firsts = [next(iter(v))[0] for v in keys.values()]
    assert len(set(firsts)) == len(firsts), f"another world size must give another key: {keys}"
    from mkernel import _tp_meta
    with pytest.raises(mkernel.MkernelError, match="world size 0 out of range"):
        _tp_meta.new_key(0)


# Lazy exports: `import mkernel` needs no torch; the torch ops load their module on first use.

def test_every_export_is_defined_or_loaded_lazily_from_a_module_that_defines_it():
    import ast
    from pathlib import Path
    pkg = Path(mkernel.__file__).parent
    assert {"gemm_ar", "all_reduce", "GemmAr"} <= set(mkernel.__all__)
    assert {k: mkernel._TORCH_OPS[k] for k in ("gemm_rs", "reduce_scatter", "GemmRs", "gemm_ar", "all_reduce",
                                                "GemmAr")} == {"gemm_rs": "tp", "reduce_scatter": "tp",
                                                               "GemmRs": "tp", "gemm_ar": "tp_ar",
                                                               "all_reduce": "tp_ar", "GemmAr": "tp_ar"}
    for name in mkernel.__all__:
        if name not in mkernel._TORCH_OPS:
            assert name in vars(mkernel), f"mkernel.{name} is neither defined nor lazily loaded"
            continue
        module = mkernel._TORCH_OPS[name]
        tree = ast.parse((pkg / f"{module}.py").read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        exported = next((ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                         and any(getattr(t, "id", None) == "__all__" for t in n.targets)), [name])
        assert name in defined and name in exported, f"mkernel.{name}: not defined and exported by mkernel/{module}.py"
    with pytest.raises(AttributeError, match="no attribute 'gemm_arr'"):
        mkernel.gemm_arr
    # No submodule is named like an export: importing a submodule sets the package attribute of its
    # name, which would shadow the lazily loaded function (mkernel.attention became the module once
    # mkernel.ring_attention had imported it).
    modules = {p.stem for p in pkg.glob("*.py")} | {p.name for p in pkg.iterdir() if p.is_dir()}
    assert not modules & set(mkernel.__all__), f"submodules named like exports: {modules & set(mkernel.__all__)}"


def test_exports_stay_functions_after_their_modules_import_each_other():
    torch_ops()
    import subprocess
    import sys
    code = ("import mkernel\n"
            "r = mkernel.ring_attention\n"  # imports the attention module too
            "assert callable(mkernel.attention) and callable(r) and mkernel.ring_attention is r\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr


def test_torch_ops_need_torch_only_when_used():
    # torch hidden (a None entry in sys.modules makes its import fail): the package and its shape
    # rules work; the first use of a torch op raises ImportError, and again on the next use.
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None\n"
            "import mkernel\n"
            "assert mkernel._tp_meta.gemm_ar_shape((256, 64), (64, 64), 2) == (256, 64)\n"
            "for name in ('gemm_ar', 'all_reduce', 'GemmAr', 'gemm_ar', 'gemm_rs'):\n"
            "    try:\n"
            "        getattr(mkernel, name)\n"
            "    except ImportError as e:\n"
            "        assert 'torch' in str(e), e\n"
            "    else:\n"
            "        raise AssertionError(name)\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_lazy_torch_exports_are_the_modules_objects_and_tp_ar_registers_its_ops():
    torch_ops()
    import subprocess
    import sys
    # A fresh interpreter: mkernel.tp alone does not register gemm_ar / all_reduce (tp_ar.py says so);
    # the first use of mkernel.gemm_ar imports mkernel.tp_ar, which registers them.
    code = ("import torch, mkernel, mkernel.tp, sys\n"
            "assert 'mkernel.tp_ar' not in sys.modules and not hasattr(torch.ops.mkernel, 'gemm_ar')\n"
            "assert mkernel.gemm_rs is mkernel.tp.gemm_rs and mkernel.GemmRs is mkernel.tp.GemmRs\n"
            "f = mkernel.gemm_ar\n"
            "import mkernel.tp_ar as t\n"
            "assert f is t.gemm_ar and mkernel.all_reduce is t.all_reduce and mkernel.GemmAr is t.GemmAr\n"
            "assert issubclass(t.GemmAr, mkernel.tp._Plan) and t.GemmAr._destroy == 'mk_gemm_ar_destroy'\n"
            "for op in ('gemm_ar', 'all_reduce', 'gemm_ar_out', 'all_reduce_out'):\n"
            "    assert hasattr(torch.ops.mkernel, op), op\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr


# The tensor-parallel custom ops without a GPU (torch, a CPU build will do): their fake
# implementations (what torch.compile traces) on meta tensors, their autograd formulas' shapes, and
# the public functions' argument checks, which run before any plan or collective. A FakeComm stands
# in for the communicator: nothing here reaches the library.

@pytest.fixture
def torch_tp():
    """torch, with the tensor-parallel custom ops registered (skips without torch)."""
    torch = torch_ops()
    import mkernel.tp  # noqa: F401
    import mkernel.tp_ar  # noqa: F401
    return torch


def _meta(torch, *shape, **kw):
    return torch.empty(*shape, device="meta", dtype=kw.pop("dtype", torch.bfloat16), **kw)


_M, _N, _K = 512, 256, 384  # m splits into 4 row blocks of 128 rows


def _reducing_case(op, world):
    """(input shapes, output shape) of the reduce-scatter / all-reduce ops at _M, _N, _K on `world` ranks:
    gemm_rs / reduce_scatter give this rank's m / world rows, gemm_ar / all_reduce the whole [m, n]."""
    rows = _M // world if op in ("gemm_rs", "reduce_scatter") else _M
    inputs = [(_M, _K), (_N, _K)] if op.startswith("gemm") else [(_M, _N)]
    return inputs, (rows, _N)


_REDUCING = ("gemm_rs", "gemm_ar", "reduce_scatter", "all_reduce")


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("op", _REDUCING)
def test_tp_fake_implementations_give_output_shapes(torch_tp, op, world):
    torch = torch_tp
    comm = FakeComm(world)
    key = mkernel._tp_meta.register(comm)
    shapes, out_shape = _reducing_case(op, world)
    args = [_meta(torch, *s) for s in shapes]
    out = getattr(torch.ops.mkernel, op)(*args, key)
    assert tuple(out.shape) == out_shape and out.dtype == torch.bfloat16 and out.device.type == "meta"
    assert getattr(torch.ops.mkernel, op + "_out")(*args, key, _meta(torch, *out_shape)) is None


@pytest.mark.parametrize("call,pattern", [
    (lambda t, ops, m, k: ops.gemm_ar(m(512, 384, dtype=t.float32), m(256, 384), k),
     r"gemm_ar: a must be a 2-D bfloat16 tensor \(got torch.float32"),
    (lambda t, ops, m, k: ops.gemm_ar(m(512, 384), m(256, 384, 1), k), "gemm_ar: b must be a 2-D bfloat16"),
    (lambda t, ops, m, k: ops.gemm_ar(m(385, 384), m(256, 384), k), r"gemm_ar: m \(rows of a\) \(385\) must split"),
    (lambda t, ops, m, k: ops.gemm_ar(m(512, 384), m(256, 320), k), r"gemm_ar: a is \[512, 384\] but b is"),
    # the out= variants: gemm_ar's and all_reduce's out is the whole [m, n], not gemm_rs's m / world rows
    (lambda t, ops, m, k: ops.gemm_ar_out(m(512, 384), m(256, 384), k, m(256, 256)),
     r"gemm_ar: out must be \[512, 256\] \(got \[256, 256\]\)"),
    (lambda t, ops, m, k: ops.gemm_rs_out(m(512, 384), m(256, 384), k, m(512, 256)),
     r"gemm_rs: out must be \[256, 256\] \(got \[512, 256\]\)"),
    (lambda t, ops, m, k: ops.gemm_ar_out(m(512, 384), m(256, 384), k, m(512, 256, dtype=t.float16)),
     "gemm_ar: out must be a 2-D bfloat16"),
    (lambda t, ops, m, k: ops.all_reduce(m(512, 100), k), r"all_reduce: n \(columns of x\) must be a positive"),
    (lambda t, ops, m, k: ops.all_reduce(m(512 * 256), k), "all_reduce: x must be a 2-D bfloat16"),
    (lambda t, ops, m, k: ops.all_reduce_out(m(512, 256), k, m(256, 256)),
     r"all_reduce: out must be \[512, 256\] \(got \[256, 256\]\)"),
    (lambda t, ops, m, k: ops.reduce_scatter_out(m(512, 256), k, m(512, 256)),
     r"reduce_scatter: out must be \[256, 256\]"),
    (lambda t, ops, m, k: ops.all_reduce(m(512, 256), k + 1), "no communicator with key"),
])
def test_tp_fake_implementations_reject_what_the_real_ones_would(torch_tp, call, pattern):
    torch = torch_tp
    comm = FakeComm(world=2)
    key = mkernel._tp_meta.register(comm)
    with pytest.raises(mkernel.MkernelError, match=pattern):
        call(torch, torch.ops.mkernel, lambda *s, **kw: _meta(torch, *s, **kw), key)


@pytest.mark.parametrize("op,needs", [(op, needs) for op in ("gemm_rs", "gemm_ar") for needs in
                                       ("both", "a only", "b only")] + [("reduce_scatter", "both"),
                                                                        ("all_reduce", "both")])
def test_tp_autograd_formulas_give_gradients_of_the_inputs_shapes(torch_tp, op, needs):
    # On meta tensors: the backward's collectives (fake) and matmuls chain with consistent shapes.
    torch = torch_tp
    comm = FakeComm(world=2)
    key = mkernel._tp_meta.register(comm)
    shapes, _ = _reducing_case(op, 2)
    args = [_meta(torch, *s, requires_grad=(i == 0 and needs != "b only") or (i == 1 and needs != "a only"))
            for i, s in enumerate(shapes)]
    getattr(torch.ops.mkernel, op)(*args, key).float().sum().backward()
    for t in args:
        if t.requires_grad:
            assert t.grad is not None and t.grad.shape == t.shape and t.grad.dtype == torch.bfloat16
        else:
            assert t.grad is None


@pytest.mark.parametrize("call,pattern", [
    (lambda t, a, b, x, c: mkernel.gemm_ar([[1.0]], b, c), "gemm_ar: a must be a torch.Tensor"),
    (lambda t, a, b, x, c: mkernel.gemm_ar(a, b.float(), c), "gemm_ar: b must be bfloat16"),
    (lambda t, a, b, x, c: mkernel.all_reduce(x.cpu(), c), "all_reduce: x must be on a CUDA device"),
    (lambda t, a, b, x, c: mkernel.gemm_ar(a[:, :256], b, c), "gemm_ar: a must be contiguous"),
    (lambda t, a, b, x, c: mkernel.all_reduce(x[0], c), r"all_reduce: x must be 2-D"),
    (lambda t, a, b, x, c: mkernel.gemm_ar(a[:385], b, c), "equal row blocks"),
    (lambda t, a, b, x, c: mkernel.gemm_ar(a, b[:, :256].contiguous(), c), r"b must be \[n, 384\]"),
    (lambda t, a, b, x, c: mkernel.gemm_ar(a, b[:100], c), "multiple of 64"),
    (lambda t, a, b, x, c: mkernel.all_reduce(x[:, :100].contiguous(), c), "multiple of 64"),
    (lambda t, a, b, x, c: mkernel.gemm_ar(a.requires_grad_(), b, c, out=t.empty(512, 256, device="cuda",
                                                                                dtype=t.bfloat16)),
     "gemm_ar: out= does not support autograd"),
    (lambda t, a, b, x, c: mkernel.all_reduce(x.requires_grad_(), c, out=t.empty_like(x)),
     "all_reduce: out= does not support autograd"),
    (lambda t, a, b, x, c: mkernel.gemm_rs(a.requires_grad_(), b, c, out=t.empty(256, 256, device="cuda",
                                                                                dtype=t.bfloat16)),
     "gemm_rs: out= does not support autograd"),
    (lambda t, a, b, x, c: mkernel.all_reduce(x, object()), "not a mkernel.Communicator"),
])
def test_tp_public_functions_check_arguments_before_any_collective(torch_tp, call, pattern):
    # Fake CUDA tensors (no GPU needed): every check here runs before a plan is looked up, so one
    # rank's bad call fails on that rank alone (tests/python/gpu/dist_tp_check.py: on 2 GPUs).
    torch = torch_tp
    from torch._subclasses.fake_tensor import FakeTensorMode
    comm = FakeComm(world=2)
    with FakeTensorMode():
        a, b, x = (torch.empty(*s, device="cuda", dtype=torch.bfloat16) for s in ((_M, _K), (_N, _K), (_M, _N)))
        try:
            with pytest.raises(mkernel.MkernelError, match=pattern):
                call(torch, a, b, x, comm)
        except RuntimeError as ex:  # (a case that slices a fake CUDA tensor, under a torch that needs a driver)
            skip_if_driver_needed(torch, ex)
            raise


@pytest.mark.parametrize("op", _REDUCING)
def test_tp_public_functions_that_autograd_records_go_through_the_custom_op(torch_tp, op):
    # Fake CUDA inputs that require grad: the call dispatches to torch.ops.mkernel.<op> (its fake
    # implementation here) rather than straight to the library, and its output has the op's shape.
    torch = torch_tp
    from torch._subclasses.fake_tensor import FakeTensorMode
    need_fake_cuda(torch)  # (torch 2.4 without a driver aborts in autograd.Function.apply)
    comm = FakeComm(world=2)
    shapes, out_shape = _reducing_case(op, 2)
    with FakeTensorMode():
        args = [torch.empty(*s, device="cuda", dtype=torch.bfloat16, requires_grad=True) for s in shapes]
        out = getattr(mkernel, op)(*args, comm)
        assert tuple(out.shape) == out_shape and out.is_cuda and out.requires_grad


# The attention ops without a GPU: argument checks of the public functions and the fake (meta)
# implementations torch.compile traces (shapes, and the same rules at trace time).

@pytest.fixture
def torch_attn():
    torch = torch_ops()
    import mkernel._attention  # noqa: F401
    import mkernel._ring_attention  # noqa: F401
    return torch


def _qkv(torch, b=2, s=256, h=8, hkv=2, d=128, dtype=None, device="meta"):
    dtype = dtype or torch.bfloat16
    return (torch.empty(b, s, h, d, dtype=dtype, device=device),
            torch.empty(b, s, hkv, d, dtype=dtype, device=device), torch.empty(b, s, hkv, d, dtype=dtype, device=device))


def test_attention_checks_arguments_before_the_library(torch_attn):
    torch = torch_attn
    with pytest.raises(mkernel.MkernelError, match="q must be bfloat16"):
        mkernel.attention(*_qkv(torch, dtype=torch.float32, device="cpu"))
    with pytest.raises(mkernel.MkernelError, match="q must be on a CUDA device"):
        mkernel.attention(*_qkv(torch, device="cpu"))
    with pytest.raises(mkernel.MkernelError, match="must be a torch.Tensor"):
        mkernel.ring_attention(None, None, None, FakeComm())


@pytest.mark.parametrize("op", ["attention", "ring_attention"])
def test_attention_fakes_give_shapes_and_reject_bad_ones(torch_attn, op):
    torch = torch_attn
    from mkernel import _tp_meta
    comm = FakeComm()
    extra = (_tp_meta.register(comm),) if op == "ring_attention" else ()
    fn = getattr(torch.ops.mkernel, op)
    q, k, v = _qkv(torch)
    out, lse = fn(q, k, v, *extra, True, 0.0)
    assert out.shape == q.shape and out.dtype == torch.bfloat16 and out.is_contiguous()
    assert lse.shape == (2, 8, 256) and lse.dtype == torch.float32
    t = q.transpose(1, 2).contiguous().transpose(1, 2)  # non-contiguous: the real op makes it contiguous
    assert fn(t, k, v, *extra, False, 0.0)[0].is_contiguous()
    bad = {"head_dim must be 64 or 128": _qkv(torch, d=96), "kv_heads \\(3\\) must divide heads": _qkv(torch, hkv=3),
           "k must be bfloat16": (q, k.float(), v), "k must be 4-D": (q, k[0], v),
           "k .* and v .* differ": (q, k, v[:, :128])}
    for pattern, args in bad.items():
        with pytest.raises(mkernel.MkernelError, match=pattern):
            fn(*args, *extra, False, 0.0)


def test_warnings_name_the_first_caller_outside_the_package():
    """mkernel's warnings (e.g. the plan-cache one in mkernel.tp) point at the user's line, not at the library's
    frames between (mkernel._lib.outside_stacklevel)."""
    import warnings
    from mkernel._lib import outside_stacklevel
    g = {"__name__": "mkernel._fake", "outside_stacklevel": outside_stacklevel, "warnings": warnings}
    exec("def inner():\n    warnings.warn('x', RuntimeWarning, stacklevel=outside_stacklevel())\n"
         "def outer():\n    inner()\n", g)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g["outer"]()
    assert len(caught) == 1 and caught[0].filename == __file__, [(w.filename, w.lineno) for w in caught]


# MK_PLAN_CACHE_MAX: the knob as the library reads it, and the bound's policy (mkernel/_plan_cache.py).

def test_knob_int_reads_the_declared_knob(monkeypatch):
    from mkernel._lib import knob_int
    monkeypatch.delenv("MK_PLAN_CACHE_MAX", raising=False)
    assert knob_int("MK_PLAN_CACHE_MAX") == 0  # the declared default
    monkeypatch.setenv("MK_PLAN_CACHE_MAX", "5")
    assert knob_int("MK_PLAN_CACHE_MAX") == 5
    monkeypatch.setenv("MK_PLAN_CACHE_MAX", "-1")
    with pytest.raises(mkernel.MkernelError, match="MK_PLAN_CACHE_MAX"):
        knob_int("MK_PLAN_CACHE_MAX")
    with pytest.raises(mkernel.MkernelError, match="no knob named MK_NO_SUCH_KNOB"):
        knob_int("MK_NO_SUCH_KNOB")
    with pytest.raises(mkernel.MkernelError, match="MK_SIGNAL_REUSE is not an integer knob"):
        knob_int("MK_SIGNAL_REUSE")  # a Bool knob


class _Plan:
    def __init__(self, name, closed, captured=False):
        self.name, self.closed, self.captured = name, closed, captured

    def close(self):
        self.closed.append(self.name)


def test_plan_cache_bound_closes_the_oldest_plans_of_one_communicator():
    from mkernel._plan_cache import close_oldest
    closed = []
    plans = {}
    for i in range(4):  # two communicators' plans, made interleaved
        for comm in (1, 2):
            plans[("GemmRs", comm, (i,))] = _Plan(f"c{comm}s{i}", closed)
    before = []  # what the caller drops first (its fast-path entries): once, before any close
    hook = lambda: before.append(list(closed))  # noqa: E731
    assert close_oldest(plans, 1, 0, hook) == (0, 0) and closed == []   # 0: unbounded
    assert close_oldest(plans, 1, 5, hook) == (0, 0) and closed == []   # room for one more already
    assert before == []
    assert close_oldest(plans, 1, 3, hook) == (2, 0)                    # 4 held: the 2 oldest go, 2 stay, 1 more fits
    assert before == [[]]
    assert closed == ["c1s0", "c1s1"]                                   # oldest first, in the order made
    assert [k for k in plans if k[1] == 1] == [("GemmRs", 1, (2,)), ("GemmRs", 1, (3,))]
    assert len([k for k in plans if k[1] == 2]) == 4              # the other communicator's plans untouched
    assert close_oldest(plans, 2, 1) == (4, 0) and closed[2:] == ["c2s0", "c2s1", "c2s2", "c2s3"]


def test_plan_cache_bound_while_another_thread_adds_plans_of_its_own_communicator():
    # One host thread per communicator is allowed: the bound's scan of the shared cache must not fail on one
    # rank because another thread added a plan meanwhile ("dictionary changed size during iteration", before
    # the scan took a snapshot of the keys). Made deterministic: the communicator key's comparison, which
    # the scan calls for every cached plan, adds another communicator's plan as a second thread could.
    from mkernel._plan_cache import close_oldest
    closed, plans = [], {}

    class Key:
        def __init__(self):
            self.added = 0

        def __eq__(self, other):
            if isinstance(other, Key):
                return other is self
            plans[("GemmRs", 2, (self.added,))] = _Plan("other", [])
            self.added += 1
            return False

        __hash__ = object.__hash__

    mine = Key()
    plans[("GemmRs", 2, (-1,))] = _Plan("other", [])
    for i in range(3):
        plans[("GemmRs", mine, (i,))] = _Plan(f"mine{i}", closed)
    assert close_oldest(plans, mine, 2) == (2, 0) and closed == ["mine0", "mine1"]
    assert mine.added > 0  # the other communicator's plans did arrive during the scan


def test_plan_cache_bound_never_closes_a_captured_plan():
    # A plan captured in a CUDA graph is used by every replay: the bound skips it (it still counts) and
    # closes the oldest others in its place; what it cannot close is returned (the caller warns).
    from mkernel._plan_cache import close_oldest
    closed = []
    plans = {("AgGemm", 1, (i,)): _Plan(f"s{i}", closed, captured=i in (0, 2)) for i in range(5)}
    keep = lambda p: p.captured  # noqa: E731
    assert close_oldest(plans, 1, 3, keep=keep) == (3, 0)         # 5 held, 2 fit: s1, s3, s4 go (s0, s2 kept)
    assert closed == ["s1", "s3", "s4"]
    assert [k[2] for k in plans] == [(0,), (2,)]
    before = []
    assert close_oldest(plans, 1, 2, lambda: before.append(1), keep) == (0, 1)  # only captured ones left
    assert closed == ["s1", "s3", "s4"] and before == []          # nothing closed: the hook does not run
    assert close_oldest(plans, 1, 2) == (1, 0) and closed[-1] == "s0"  # without keep, the oldest goes


def test_plan_cache_keeps_the_plans_a_graph_on_some_rank_still_holds():
    # The bound keeps a captured plan while a graph on any rank holds it (graphs_alive there), and closes one
    # whose graphs are gone on every rank; the ranks agree in one exchange, made only where the bound is about to
    # close and a plan was captured (the same on every rank).
    from mkernel._plan_cache import close_oldest, held_by_graphs
    closed = []
    plans = {("GemmRs", 1, (i,)): _Plan(f"s{i}", closed, captured=i < 3) for i in range(4)}
    for i, p in enumerate(plans.values()):
        p.graphs_alive = i == 0  # s0: a graph holds it here; s1: only on the other rank; s2: nowhere
    sent = []

    def allgather(mine):  # this rank's flags, then the other rank's: s1's graph is alive there
        sent.append(mine)
        return [mine, bytes([0, 1, 0])]

    assert held_by_graphs(plans, 1, 0, allgather) is None and held_by_graphs(plans, 1, 5, allgather) is None
    assert held_by_graphs(plans, 2, 1, allgather) is None  # another communicator: none of its plans
    assert sent == []  # no exchange where nothing would be closed
    keep = held_by_graphs(plans, 1, 3, allgather)
    assert sent == [bytes([1, 0, 0])]  # s0, s1, s2: the captured ones, in the order made
    assert [keep(p) for p in plans.values()] == [True, True, False, False]
    assert close_oldest(plans, 1, 3, keep=keep) == (2, 0) and closed == ["s2", "s3"]
    uncaptured = {("GemmRs", 1, (i,)): _Plan(f"u{i}", closed) for i in range(3)}
    assert held_by_graphs(uncaptured, 1, 1, allgather) is None and len(sent) == 1  # none captured: no exchange
    # A captured plan younger than those the bound closes: the oldest go either way, no exchange.
    younger = {("GemmRs", 1, (i,)): _Plan(f"y{i}", closed, captured=i == 1) for i in range(4)}
    assert held_by_graphs(younger, 1, 4, allgather) is None and len(sent) == 1


def _second_plan_under_a_bound_of_one(monkeypatch, torch, tp, old, evicted, comm):
    """tp._plan for a second shape of a stand-in plan class under MK_PLAN_CACHE_MAX=1, with `old` the one plan
    cached (key ("Fake", "c", (1,))), `evicted` the set of plans the bound closed and `comm` what lookup gives."""
    monkeypatch.setenv("MK_PLAN_CACHE_MAX", "1")
    monkeypatch.setattr(tp, "_PLANS", {("Fake", "c", (1,)): old})
    monkeypatch.setattr(tp, "_EVICTED", evicted)
    monkeypatch.setattr(tp, "lookup", lambda key: comm)
    monkeypatch.setattr(tp, "_drop_hot", lambda key: None)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)

    class Fake:
        def __init__(self, comm, *shape):
            self.shape, self.captured = shape, False
    return tp._plan(Fake, "c", 2)


def test_plan_cache_bound_asks_the_communicator_which_captured_plans_a_graph_holds(monkeypatch):
    # mkernel.tp._plan's wiring: the exchange goes through the plans' communicator (lookup(key)._allgather).
    torch = torch_ops()
    from mkernel import tp
    closed, sent = [], []

    class Comm:
        def _allgather(self, mine):
            sent.append(mine)
            return [mine, b"\x00"]  # the other rank's graph is gone too

    old = _Plan("old", closed, captured=True)
    old.graphs_alive = False
    p = _second_plan_under_a_bound_of_one(monkeypatch, torch, tp, old, set(), Comm())
    assert sent == [b"\x00"] and closed == ["old"] and list(tp._PLANS.values()) == [p]


def test_tp_side_caches_stay_bounded_under_many_shapes(monkeypatch):
    # Varying shapes (token counts per step) filled the shape rules' cache and the set of plans the bound closed
    # (which only words a capture's error) without end, beside a bounded plan cache. Both start over at 4096.
    torch = torch_ops()
    from mkernel import _tp_meta, tp
    monkeypatch.setattr(_tp_meta, "_SHAPES", {("rule", i): (i,) for i in range(4096)})
    rule = lambda x, sizes: (x, 1)  # noqa: E731
    assert tp._shape(rule, 7) == (7, 1)
    assert _tp_meta._SHAPES == {(rule, 7): (7, 1)}
    closed = []
    p = _second_plan_under_a_bound_of_one(monkeypatch, torch, tp, _Plan("old", closed),
                                          {("Fake", "c", (-i,)) for i in range(1, 4097)}, "comm")
    assert p.shape == (2,) and closed == ["old"]
    assert tp._EVICTED == {("Fake", "c", (1,))}  # started over, then the plan just closed
