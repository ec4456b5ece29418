"""CPU tests (torch, no GPU): the public ops take the dispatcher, never the library, wherever torch is
tracing or transforming -- a TorchDispatchMode (FakeTensorMode, make_fx), a torch.func transform, a
forward-AD level, a tensor subclass -- so fake tensors reach the fake implementations, make_fx records
torch.ops.mkernel.*, and a forward-mode tangent is refused instead of dropped (mkernel/ops.py: traced()).

Every library-facing function is replaced by one that fails the test: a call that reaches the library
under a mode (as before this was fixed, where it launched on fake tensors' pointers) fails here."""
import sys
import warnings

import pytest

import mkernel

from torchops import torch_ops  # noqa: E402

torch = torch_ops()  # (torch >= 2.4, or the module skips saying why)
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
import torch.autograd.forward_ad as fwAD  # noqa: E402

import mkernel.tp  # noqa: E402,F401  (registers the tensor-parallel custom ops)
import mkernel.tp_ar  # noqa: E402,F401
import mkernel._attention  # noqa: E402,F401
import mkernel._ring_attention  # noqa: E402,F401
from mkernel import ops, tp, tp_ar, _attention, _ring_attention  # noqa: E402

from test_package import FakeComm  # noqa: E402
from fakecuda import need_fake_cuda  # noqa: E402


@pytest.fixture
def fake_cuda():
    """For a test that traces fake CUDA tensors: skips where this torch needs a driver for them (fakecuda.py)."""
    need_fake_cuda(torch)

# (module, name) of every function through which a public op reaches the library
_LIBRARY_PATHS = [(ops, "_gemm_into"), (tp, "_ag_gemm_run"), (tp, "_gemm_rs_run"), (tp, "_all_gather_run"),
                  (tp, "_reduce_scatter_run"), (tp_ar, "_gemm_ar_run"), (tp_ar, "_all_reduce_run"),
                  (_attention, "_run"), (_ring_attention, "_run")]


@pytest.fixture
def no_library(monkeypatch):
    """The library's entry points fail the test (a call under a mode must not reach them)."""
    for mod, name in _LIBRARY_PATHS:
        assert hasattr(mod, name), f"{mod.__name__}.{name} is gone: update _LIBRARY_PATHS"

        def reached(*a, _n=f"{mod.__name__}.{name}", **k):
            raise AssertionError(f"{_n} reached: the library was called under a dispatcher mode")
        monkeypatch.setattr(mod, name, reached)


_M, _N, _K = 512, 256, 384


def _mats():
    bf = dict(device="cuda", dtype=torch.bfloat16)
    return torch.empty(_M, _K, **bf), torch.empty(_N, _K, **bf), torch.empty(_M, _N, **bf)


def _qkv():
    bf = dict(device="cuda", dtype=torch.bfloat16)
    return (torch.empty(1, 256, 8, 128, **bf), torch.empty(1, 256, 2, 128, **bf), torch.empty(1, 256, 2, 128, **bf))


# op -> (call(comm, out), output shape(s)); out: None, or the tensors to write into
_CALLS = {
    "gemm": (lambda c, o: mkernel.gemm(*_mats()[:2], out=o), (_M, _N)),
    "ag_gemm": (lambda c, o: mkernel.ag_gemm(_mats()[0][:256], _mats()[1], c, out=o), (_M, _N)),
    "gemm_rs": (lambda c, o: mkernel.gemm_rs(*_mats()[:2], c, out=o), (_M // 2, _N)),
    "gemm_ar": (lambda c, o: mkernel.gemm_ar(*_mats()[:2], c, out=o), (_M, _N)),
    "all_gather": (lambda c, o: mkernel.all_gather(_mats()[2][:256], c, out=o), (_M, _N)),
    "reduce_scatter": (lambda c, o: mkernel.reduce_scatter(_mats()[2], c, out=o), (_M // 2, _N)),
    "all_reduce": (lambda c, o: mkernel.all_reduce(_mats()[2], c, out=o), (_M, _N)),
}


def _fresh(shape):
    return torch.empty(*shape, device="cuda", dtype=torch.bfloat16)


@pytest.mark.parametrize("where", ["in the mode", "fake inputs outside it"])
@pytest.mark.parametrize("with_out", [False, True])
@pytest.mark.parametrize("op", sorted(_CALLS))
def test_fake_tensor_mode_calls_take_the_fake_implementations(no_library, monkeypatch, op, with_out, where):
    # Outside the mode the inputs are a tensor subclass (traced()'s second rule); _mats() makes them in it.
    if op in ("ag_gemm", "all_gather"):
        need_fake_cuda(torch)  # (their calls slice a fake CUDA tensor)
    call, shape = _CALLS[op]
    comm = FakeComm(world=2)
    mode = FakeTensorMode()
    with mode:
        mats = _mats()
        out = _fresh(shape) if with_out else None
    if where == "in the mode":
        with mode:
            res = call(comm, out)
    else:
        monkeypatch.setattr(sys.modules[__name__], "_mats", lambda: mats)
        res = call(comm, out)
    assert type(res).__name__ == "FakeTensor" and tuple(res.shape) == shape
    if with_out:
        assert res is out


@pytest.mark.parametrize("op", ["attention", "ring_attention"])
@pytest.mark.parametrize("with_out", [False, True])
def test_fake_tensor_mode_attention_calls_take_the_fake_implementations(no_library, op, with_out):
    if with_out:
        need_fake_cuda(torch)  # (with out= and lse=, torch 2.4-2.7 needs a driver here: fakecuda.py)
    comm = FakeComm(world=2)
    extra = (comm,) if op == "ring_attention" else ()
    with FakeTensorMode():
        q, k, v = _qkv()
        kw = {}
        if with_out:
            kw = dict(out=torch.empty_like(q), lse=torch.empty(1, 8, 256, device="cuda", dtype=torch.float32))
        out, lse = getattr(mkernel, op)(q, k, v, *extra, causal=True, **kw)
        assert tuple(out.shape) == tuple(q.shape) and tuple(lse.shape) == (1, 8, 256)
        if with_out:
            assert out is kw["out"] and lse is kw["lse"]


def test_make_fx_records_the_custom_ops(no_library):
    comm = FakeComm(world=2)

    def f(a, b, x, q, k, v):
        y = mkernel.gemm_ar(a, b, comm) + mkernel.gemm(a, b)
        z = mkernel.all_reduce(x, comm, out=torch.empty_like(x))
        o, _ = mkernel.attention(q, k, v, causal=True)
        r, _ = mkernel.ring_attention(q, k, v, comm)
        return y, z, o, r

    with FakeTensorMode():
        args = (*_mats(), *_qkv())
    code = make_fx(f, tracing_mode="fake")(*args).code
    for op in ("mkernel.gemm_ar.default", "mkernel.gemm.default", "mkernel.all_reduce_out.default",
               "mkernel.attention.default", "mkernel.ring_attention.default"):
        assert op in code, code


def test_forward_ad_tangents_are_refused_not_dropped(no_library):
    # torch itself drops a dual input's tangent at these custom ops (no forward formula): refused instead.
    comm = FakeComm(world=2)
    with FakeTensorMode():
        a, b, x = _mats()
        with fwAD.dual_level():
            d = fwAD.make_dual(a, torch.randn_like(a))
            for call in (lambda: mkernel.gemm(d, b), lambda: mkernel.gemm_ar(d, b, comm),
                         lambda: mkernel.gemm_rs(a, fwAD.make_dual(b, torch.randn_like(b)), comm)):
                with pytest.raises(mkernel.MkernelError, match="forward-mode AD .* not supported"):
                    call()
            # inside the level, inputs without a tangent still run (through the dispatcher)
            assert tuple(mkernel.gemm_ar(a, b, comm).shape) == (_M, _N)
        with pytest.raises(mkernel.MkernelError, match="forward-mode AD .* not supported"):
            torch.func.jvp(lambda t: mkernel.all_reduce(t, comm), (x,), (torch.randn_like(x),))


def test_modes_on_and_traced_see_each_kind_of_tracing():
    plain = torch.zeros(2, 2)
    assert not ops.modes_on() and not ops.traced("op", plain, None, [1])
    assert not ops.traced("op", torch.nn.Parameter(plain))  # a weight is a plain tensor
    with FakeTensorMode() as mode:
        assert ops.modes_on()
        fake = mode.from_tensor(plain)
    assert not ops.modes_on() and ops.traced("op", plain, fake)  # a subclass, outside its mode
    assert not ops._fast_ok(fake, fake.dtype, -1)  # the fast paths' check refuses it too
    seen = []

    def probe(t):
        seen.append(ops.modes_on())
        return t.sum()
    make_fx(probe)(plain)
    torch.vmap(probe)(plain)
    torch.func.grad(probe)(plain)
    with fwAD.dual_level():
        seen.append(ops.modes_on())
    assert seen == [True, True, True, True]
    assert not ops.modes_on()


class _Passthrough(TorchDispatchMode):
    """A mode that records nothing and changes nothing: only that one is active."""
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("op", ["gemm_ar", "ring_attention", "attention"])
def test_each_fast_path_checks_for_modes_first(monkeypatch, op):
    # Plain CPU tensors, and a device of -1 everywhere (a CPU tensor's get_device()), so that the fast path's
    # tensor checks all pass: outside any mode the cached launch runs (shown first), while under a
    # do-nothing TorchDispatchMode or vmap it must not (the call goes on to the full path, which refuses CPU
    # tensors here).
    comm = FakeComm(world=2)
    comm._device = -1
    launched = []
    if op == "gemm_ar":
        a, b = torch.zeros(_M, _K, dtype=torch.bfloat16), torch.zeros(_N, _K, dtype=torch.bfloat16)
        monkeypatch.setattr(tp, "_get_device", lambda: -1)
        monkeypatch.setitem(tp._HOT, ("gemm_ar", comm._uid, a.shape, b.shape),
                            (lambda *t: launched.append(t), (_M, _N)))
        args, call = (a, b), (lambda x, y: mkernel.gemm_ar(x, y, comm))
    else:
        q, k, v = (torch.zeros(1, 256, h, 128, dtype=torch.bfloat16) for h in (8, 2, 2))
        args = (q, k, v)
        if op == "ring_attention":
            monkeypatch.setattr(_ring_attention, "_get_device", lambda: -1)
            monkeypatch.setitem(tp._HOT, ("ring_attention", comm._uid, q.shape, k.shape, v.shape, False, 0.0),
                                lambda *t: launched.append(t) or (q, q))
            call = (lambda x, y, z: mkernel.ring_attention(x, y, z, comm))
        else:
            monkeypatch.setattr(_attention, "_get_device", lambda: -1)
            monkeypatch.setattr(_attention, "_launch", lambda *t: launched.append(t) or 0)
            _attention._SEEN.add((q.shape, k.shape, v.shape))
            call = mkernel.attention
    call(*args)
    assert len(launched) == 1, "the test's setup does not reach the fast path's launch"
    with _Passthrough():
        with pytest.raises(mkernel.MkernelError, match="CUDA device"):
            call(*args)
    with pytest.raises(mkernel.MkernelError, match="CUDA device"):
        torch.vmap(lambda *t: call(*(x[0] for x in t)))(*(x.unsqueeze(0) for x in args))
    assert len(launched) == 1


def test_traced_out_and_lse_are_written_and_checked(fake_cuda, no_library):
    # Traced with out= / lse=, attention runs its op and copies into them (the graph has the copies); a given
    # out or lse is checked as in an eager call.
    with FakeTensorMode():
        q, k, v = _qkv()
        out, lse = torch.empty_like(q), torch.empty(1, 8, 256, device="cuda", dtype=torch.float32)

    def f(q, k, v, out, lse):
        return mkernel.attention(q, k, v, out=out, lse=lse)
    code = make_fx(f, tracing_mode="fake")(q, k, v, out, lse).code
    assert "mkernel.attention.default" in code and code.count("aten.copy_.default") == 2, code
    with FakeTensorMode():
        q, k, v = _qkv()
        for kw, pattern in ((dict(out=torch.empty_like(q, dtype=torch.float32)), "out must be a contiguous bf16"),
                            (dict(out=torch.empty(4, 256, 8, 128, device="cuda", dtype=torch.bfloat16)),
                             "out must be"),
                            (dict(lse=torch.empty(1, 8, 256, device="cuda", dtype=torch.float16)), "lse must be")):
            with pytest.raises(mkernel.MkernelError, match=pattern):
                mkernel.attention(q, k, v, **kw)


def test_symbolic_shapes_trace(fake_cuda, no_library):
    # Dynamic shapes (make_fx's symbolic tracing, torch.export's dynamic dims): the sizes are SymInts, which do
    # not hash, so nothing may key a cache on them while traced.
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
    mode = FakeTensorMode(shape_env=ShapeEnv())

    def sym(*shape):
        ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * len(shape))
        f = mode.from_tensor(torch.empty(*shape, dtype=torch.bfloat16), symbolic_context=ctx)
        with mode:
            return f.to("cuda")
    q, k = sym(1, 256, 8, 128), sym(1, 256, 2, 128)
    a, b = sym(256, 384), sym(256, 384)
    assert isinstance(q.shape[1], torch.SymInt)
    comm = FakeComm(world=2)
    with mode:
        assert mkernel.attention(q, k, k)[0].shape == q.shape
        assert mkernel.ring_attention(q, k, k, comm)[0].shape == q.shape
        assert mkernel.gemm_ar(a, b, comm).shape[1] == b.shape[0]
        assert mkernel.ag_gemm(a, b, comm, return_gathered=True)[1].shape[1] == a.shape[1]


def test_alignment_under_a_transform_is_judged_without_an_address(fake_cuda, no_library):
    # Inside torch.func.grad a tensor is a wrapper of the plain type whose data_ptr() raises: a misaligned one
    # is still refused with the library's message (judged by its storage offset), not a RuntimeError.
    comm = FakeComm(world=2)
    with FakeTensorMode():
        flat = torch.empty(_M * _K + 64, device="cuda", dtype=torch.bfloat16)
        b = torch.empty(_N, _K, device="cuda", dtype=torch.bfloat16)
        with pytest.raises(mkernel.MkernelError, match="16-byte aligned address .*storage offset 1"):
            torch.func.grad(lambda x: mkernel.gemm_ar(x, b, comm).float().sum())(flat[1:1 + _M * _K].view(_M, _K))


def test_fast_paths_step_aside_under_a_mode(monkeypatch):
    # A steady-state entry for these shapes exists (as after an eager call); under FakeTensorMode the fast
    # path must not launch it: the call goes to the fake implementation.
    comm = FakeComm(world=2)
    comm._device = 0
    launched = []
    monkeypatch.setattr(tp, "_get_device", lambda: 0)
    with FakeTensorMode():
        a, b, _ = _mats()
        tp._HOT[("gemm_ar", comm._uid, a.shape, b.shape)] = (lambda *t: launched.append(t), (_M, _N))
        try:
            out = mkernel.gemm_ar(a, b, comm)
        finally:
            tp._HOT.pop(("gemm_ar", comm._uid, a.shape, b.shape), None)
    assert not launched and tuple(out.shape) == (_M, _N)


def test_fake_tensors_alignment_is_judged_without_their_address(fake_cuda, no_library):
    comm = FakeComm(world=2)
    with FakeTensorMode():
        flat = torch.empty(_M * _K + 64, device="cuda", dtype=torch.bfloat16)
        b = torch.empty(_N, _K, device="cuda", dtype=torch.bfloat16)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # FakeTensor.data_ptr() warns (deprecated, "will error")
            with pytest.raises(mkernel.MkernelError, match="16-byte aligned address .*storage offset 1"):
                mkernel.gemm_ar(flat[1:1 + _M * _K].view(_M, _K), b, comm)
            assert tuple(mkernel.gemm_ar(flat[8:8 + _M * _K].view(_M, _K), b, comm).shape) == (_M, _N)


def test_gemm_under_a_mode_checks_its_arguments_at_trace_time(fake_cuda, no_library):
    with FakeTensorMode():
        a, b, _ = _mats()
        with pytest.raises(mkernel.MkernelError, match=r"b must be \[n, 384\]"):
            mkernel.gemm(a, b[:, :256].contiguous())
        with pytest.raises(mkernel.MkernelError, match=r"out must be \[512, 256\]"):
            mkernel.gemm(a, b, out=_fresh((256, 256)))


def _hand_made(cls):
    """An open plan made by hand, without the library (its methods' first check is what the test reaches)."""
    p = cls.__new__(cls)
    p._h, p._device, p.world = 1234, -1, 2
    p.shape = (1, 64, 64, 64, 64) if cls is _ring_attention.RingAttention else (64, 64, 64)
    return p


# (plan class, how the test calls one of its methods on CPU tensors)
_HAND_CALLS = [(tp.AgGemm, lambda p, x: p.run(x, x)), (tp.AgGemm, lambda p, x: p.all_gather(x)),
               (tp.GemmRs, lambda p, x: p.run(x, x)), (tp.GemmRs, lambda p, x: p.reduce_scatter(x)),
               (tp_ar.GemmAr, lambda p, x: p.run(x, x)), (tp_ar.GemmAr, lambda p, x: p.all_reduce(x)),
               (_ring_attention.RingAttention, lambda p, x: p.run(x, x, x))]


@pytest.mark.parametrize("tracing_mode", ["real", "fake"])
@pytest.mark.parametrize("cls,call", _HAND_CALLS, ids=[f"{c.__name__}.{i}" for i, (c, _) in enumerate(_HAND_CALLS)])
def test_hand_made_plans_refuse_a_graph_that_would_leave_their_launch_out(no_library, tracing_mode, cls, call):
    # make_fx(tracing_mode="real") ran the launch on the real tensors but recorded only the outputs' allocation:
    # the graph, replayed, gave uninitialised memory and no error.
    p = _hand_made(cls)

    def f(x):
        call(p, x)
        return x

    with pytest.raises(mkernel.MkernelError, match=f"mkernel.{cls.__name__}: a plan made by hand launches at once "
                                                   r"through the library, which the graph being traced \("):
        make_fx(f, tracing_mode=tracing_mode)(torch.ones(64, 64, dtype=torch.bfloat16))


def test_hand_made_plans_run_under_modes_that_record_nothing(no_library):
    # A mode that only watches (FlopCounterMode, a memory tracker) is no graph: the plan's checks go on (here to
    # the tensor check, which refuses a CPU tensor).
    from torch.utils.flop_counter import FlopCounterMode
    p = _hand_made(tp_ar.GemmAr)
    with FlopCounterMode(display=False):
        with pytest.raises(mkernel.MkernelError, match="x must be on a CUDA device"):
            p.all_reduce(torch.ones(64, 64, dtype=torch.bfloat16))
