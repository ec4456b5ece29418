"""Bad input to the public ops is refused with a clear MkernelError before the library, and for the collective
ops before a plan is made (collective: one rank's refusal there would leave the others waiting): attention's and
ring attention's causal / scale, ring attention's alignment, odd causal shards and out / lse overlapping the inputs,
the tensor-parallel ops' out / gathered overlapping their inputs, the explicit plans' methods with inputs that
require grad, and gemm's num_compute_ctas, n / k rules, empty and one-row calls.

No GPU: CPU tensors stand in for CUDA ones (the `cuda_cpu` fixture makes `is_cuda` true and the current device
-1, a CPU tensor's get_device()), so their addresses are real; every library call and plan creation is replaced by
a test double that records it or raises `Reached`."""
import contextlib
import ctypes
import re

import pytest

from torchops import torch_ops  # noqa: E402

torch = torch_ops()  # (torch >= 2.4, or the module skips saying why)

import mkernel  # noqa: E402
from mkernel import _attention, _ring_attention, _tp_plans, ops, tp, tp_ar  # noqa: E402
from test_package import FakeComm  # noqa: E402

BF16 = torch.bfloat16
_PLAN = tp._plan  # the plan cache (the cuda_cpu fixture replaces it)


class Reached(Exception):
    """A test double standing in for the library or a plan's creation was called: the bad input got past the checks."""


@pytest.fixture
def cuda_cpu(monkeypatch):
    return fake_gpu(monkeypatch)


def fake_gpu(monkeypatch):
    """The cuda_cpu fixture's body (test_bad_input_repeat.py's fixture too): CPU tensors pass for the current
    device's, plans are not made (Reached); a 2-rank FakeComm on that device."""
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    for mod in (ops, _attention, _ring_attention, _tp_plans, tp):
        if hasattr(mod, "_get_device"):
            monkeypatch.setattr(mod, "_get_device", lambda: -1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: -1)

    def plan(cls, key, *shape):
        raise Reached(f"{cls.__name__}{shape} was made")

    for mod in (tp, tp_ar, _ring_attention):
        monkeypatch.setattr(mod, "_plan", plan)
    comm = FakeComm(world=2)
    comm._device = -1
    return comm


def _empty(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype)


def _misaligned(*shape):
    """A contiguous bf16 tensor 2 bytes past a 16-byte boundary."""
    n = _numel(shape)
    flat = torch.empty(n + 8, dtype=BF16)
    off = (-flat.data_ptr() % 16) // 2 + 1
    return flat[off:off + n].view(*shape)


# ---- attention and ring attention: causal and scale ------------------------------------------------------------

BAD_CAUSAL = [0.5, "False", None, 1, torch.tensor(True), __import__("numpy").bool_(True)]
BAD_SCALE = [0.0, -1.0, float("nan"), float("inf"), 1e39, 3e38, "0.1", True, torch.tensor([0.1]), torch.tensor(True)]
# (3e38: finite in float32, but the kernels' base-2 softmax scale, scale log2(e), is not)


@pytest.mark.parametrize("causal", BAD_CAUSAL, ids=repr)
def test_attention_refuses_a_causal_that_is_not_a_bool(cuda_cpu, monkeypatch, causal):
    monkeypatch.setattr(_attention, "_launch", lambda *a: (_ for _ in ()).throw(Reached("launched")))
    q, k, v = _empty(1, 128, 2, 64), _empty(1, 128, 2, 64), _empty(1, 128, 2, 64)
    with pytest.raises(mkernel.MkernelError, match="mkernel.attention: causal must be a Python bool"):
        mkernel.attention(q, k, v, causal=causal)
    with pytest.raises(mkernel.MkernelError, match="mkernel.ring_attention: causal must be a Python bool"):
        mkernel.ring_attention(q, k, v, cuda_cpu, causal=causal)


@pytest.mark.parametrize("scale", BAD_SCALE, ids=repr)
def test_attention_refuses_a_scale_that_is_not_a_positive_finite_number(cuda_cpu, monkeypatch, scale):
    monkeypatch.setattr(_attention, "_launch", lambda *a: (_ for _ in ()).throw(Reached("launched")))
    q, k, v = _empty(1, 128, 2, 64), _empty(1, 128, 2, 64), _empty(1, 128, 2, 64)
    with pytest.raises(mkernel.MkernelError,
                       match=r"mkernel.attention: scale must be a finite number > 0 \(in float32\), or None"):
        mkernel.attention(q, k, v, scale=scale)
    with pytest.raises(mkernel.MkernelError, match=r"mkernel.ring_attention: scale must be a finite number > 0"):
        mkernel.ring_attention(q, k, v, cuda_cpu, scale=scale)


def test_attention_fast_path_sends_bad_flags_to_the_checks(cuda_cpu, monkeypatch):
    # After a good call, the same shapes take the fast path: a bad scale or causal must still be refused there
    # (scale=0 used to reach the library as its default, 1/sqrt(head_dim)), and good ones reach the library as
    # it takes them (None: 0.0).
    calls = []
    monkeypatch.setattr(_attention, "_launch", lambda fn, *a: calls.append(a[-3:-1]) or 0)
    monkeypatch.setattr(_attention, "_mk_attention", object())
    monkeypatch.setattr(_attention, "_SEEN", set())
    monkeypatch.setattr(_attention, "_LAST", [None])
    q, k, v = _empty(1, 128, 2, 64), _empty(1, 128, 2, 64), _empty(1, 128, 2, 64)
    mkernel.attention(q, k, v, scale=0.25)
    assert _attention._hot(q, k, v, False, 0.5, None, None) is not None, "the fast path was not taken"
    for bad, said in (({"scale": 0.0}, r"scale must be a finite number > 0 .*\(got float 0\.0\)"),
                      ({"scale": -0.5}, r"scale must be a finite number > 0 .*\(got float -0\.5\)"),
                      ({"causal": 1}, r"causal must be a Python bool \(got int 1\)")):
        with pytest.raises(mkernel.MkernelError, match=said):
            mkernel.attention(q, k, v, **bad)
    mkernel.attention(q, k, v, causal=True)
    import numpy as np
    mkernel.attention(q, k, v, scale=np.float32(0.5))
    assert _attention._hot(q, k, v, False, np.float64(0.125), None, None) is not None, "numpy float64: fast path"
    mkernel.attention(q, k, v, scale=torch.tensor(0.25))  # a 0-d tensor, as torch's SDPA takes
    with pytest.raises(mkernel.MkernelError, match="in float32"):
        mkernel.attention(q, k, v, scale=1e-46)  # float32 rounds it to 0: the library's default
    assert calls == [(False, 0.25), (False, 0.5), (True, 0.0), (False, 0.5), (False, 0.125), (False, 0.25)]
    assert all(type(c[1]) is float for c in calls)


@pytest.mark.parametrize("scale", [3e38, 2.4e38, 3.3e38])
def test_attention_fast_path_takes_no_scale_the_full_path_refuses(cuda_cpu, monkeypatch, scale):
    # The fast path's bound was float32's largest (3.4e38), the full path's (_f32_ok) that over log2(e) (~2.36e38):
    # a scale between went to the kernel, whose base-2 softmax scale came out inf (every output NaN).
    calls = []
    monkeypatch.setattr(_attention, "_launch", lambda fn, *a: calls.append(a[-3:-1]) or 0)
    monkeypatch.setattr(_attention, "_mk_attention", object())
    monkeypatch.setattr(_attention, "_SEEN", set())
    monkeypatch.setattr(_attention, "_LAST", [None])
    q = _empty(1, 128, 2, 64)
    mkernel.attention(q, q, q, scale=2.3e38)  # (below the bound: both paths take it)
    assert _attention._hot(q, q, q, False, 2.3e38, None, None) is not None, "the fast path was not taken"
    with pytest.raises(mkernel.MkernelError, match="scale must be a finite number > 0"):
        mkernel.attention(q, q, q, scale=scale)
    assert calls == [(False, 2.3e38)] * 2


# ---- ring attention: before its plan ---------------------------------------------------------------------------

def _ring(comm, q, k=None, v=None, **kw):
    return mkernel.ring_attention(q, q if k is None else k, q if v is None else v, comm, **kw)


def test_ring_attention_checks_alignment_and_overlaps_before_its_plan(cuda_cpu):
    comm = cuda_cpu
    q, k, v = _empty(1, 128, 2, 64), _empty(1, 128, 2, 64), _empty(1, 128, 2, 64)
    lse = _empty(1, 2, 128, dtype=torch.float32)
    with pytest.raises(mkernel.MkernelError, match="ring_attention: q must start at a 16-byte aligned address"):
        mkernel.ring_attention(_misaligned(1, 128, 2, 64), k, v, comm)
    with pytest.raises(mkernel.MkernelError, match="ring_attention: v must start at a 16-byte aligned"):
        mkernel.ring_attention(q, k, _misaligned(1, 128, 2, 64), comm)
    with pytest.raises(mkernel.MkernelError, match="ring_attention: out overlaps q"):
        mkernel.ring_attention(q, k, v, comm, out=q, lse=lse)
    with pytest.raises(mkernel.MkernelError, match="ring_attention: out overlaps v"):
        mkernel.ring_attention(q, k, v, comm, out=v)
    lse_in_k = k.view(-1)[:2 * 2 * 128].view(torch.float32).view(1, 2, 128)
    with pytest.raises(mkernel.MkernelError, match="ring_attention: lse overlaps k"):
        mkernel.ring_attention(q, k, v, comm, lse=lse_in_k)
    out = _empty(1, 128, 2, 64)
    lse_in_out = out.view(-1)[:2 * 2 * 128].view(torch.float32).view(1, 2, 128)
    with pytest.raises(mkernel.MkernelError, match="ring_attention: lse overlaps out"):
        mkernel.ring_attention(q, k, v, comm, out=out, lse=lse_in_out)
    with pytest.raises(Reached):  # the same calls, well formed, get as far as the plan
        mkernel.ring_attention(q, k, v, comm, out=out, lse=lse, causal=True, scale=0.125)
    with pytest.raises(Reached):
        _ring(comm, _empty(1, 127, 2, 64))  # (odd s_local: fine without the zigzag)


@pytest.mark.parametrize("shape,causal,said", [((1, 127, 2, 64), True, "s_local must be even"),
                                                ((1, 0, 2, 64), False, "empty tensors"),
                                                ((1, 0, 2, 64), True, "empty tensors"),
                                                ((0, 128, 2, 64), False, "empty tensors"),
                                                ((1, 128, 2, 96), False, "head_dim must be 64 or 128")])
def test_ring_attention_leaves_the_sizes_its_plan_checks_on_every_rank_to_the_plan(cuda_cpu, shape, causal, said):
    # An odd causal shard, an empty one (an uneven split of the sequence), head_dim 96: the plan constructor refuses
    # them on every rank at once, naming the rank; refused here, on one rank, they left the others waiting in the
    # plan check until the bootstrap bound. (The fake implementation, which makes no plan, still refuses them.)
    with pytest.raises(Reached):
        _ring(cuda_cpu, _empty(*shape), causal=causal)
    with pytest.raises(mkernel.MkernelError, match=said):  # (each case its own reason)
        torch.ops.mkernel.ring_attention(*(torch.empty(*shape, dtype=BF16, device="meta"),) * 3,
                                         mkernel._tp_meta.register(cuda_cpu), causal, 0.0)


def test_ring_attention_sends_kv_heads_0_to_its_plan_check_as_a_refused_value(cuda_cpu, monkeypatch):
    # k and v with no kv heads were refused before the plan, on this rank alone, while the others waited in the plan
    # check until the bootstrap bound. That check is collective, but the plan reads kv_heads 0 as heads (and would
    # pass it): it is given -1, which it refuses on every rank, naming kv_heads; this rank's error says what was wrong.
    sent = []
    monkeypatch.setattr(_ring_attention, "_plan", _PLAN)  # (the fixture's stops before the plan)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(_ring_attention, "_need", lambda symbol, op: lambda *a: sent.append(a[1:6]) or 1)
    monkeypatch.setattr(mkernel.lib, "mk_last_error", lambda: (  # (the library's words for kv_heads < 1)
        b"RingAttention's plan check: rank 1 could not make its plan: RingAttention: batch, sequence lengths and "
        b"head counts must be >= 1 (got batch 1, seq_q 128, seq_kv 256, heads 2, kv_heads -1)"))
    q, kv = _empty(1, 128, 2, 64), _empty(1, 128, 0, 64)
    for causal in (False, True):
        with pytest.raises(mkernel.MkernelError, match=r"mkernel.ring_attention: k and v have no kv heads "
                           r"\(k \(1, 128, 0, 64\)\); kv_heads must be >= 1 .*rank 1 could not make its plan.*"
                           r"kv_heads -1") as e:
            mkernel.ring_attention(q, kv, kv, cuda_cpu, causal=causal)
        assert isinstance(e.value.__cause__, mkernel.MkernelError)  # (the library's own error, chained)
    assert sent == [(1, 128, 2, -1, 64)] * 2
    with pytest.raises(mkernel.MkernelError, match=r"^RingAttention's plan check: rank 1 could not make"):
        mkernel.ring_attention(q, q, q, cuda_cpu)  # (kv heads: the library's error as it is)
    assert sent[-1] == (1, 128, 2, 2, 64) and not [k for k in tp._PLANS if k[1] == cuda_cpu._uid]
    with pytest.raises(mkernel.MkernelError, match="empty tensors"):  # (the fake implementation: no plan)
        torch.ops.mkernel.ring_attention(q.to("meta"), kv.to("meta"), kv.to("meta"),
                                         mkernel._tp_meta.register(cuda_cpu), False, 0.0)


def test_ring_attention_fake_refuses_an_odd_causal_shard():
    comm = FakeComm()
    key = mkernel._tp_meta.register(comm)
    q = torch.empty(1, 127, 2, 64, dtype=BF16, device="meta")
    with pytest.raises(mkernel.MkernelError, match="s_local must be even"):
        torch.ops.mkernel.ring_attention(q, q, q, key, True, 0.0)
    assert torch.ops.mkernel.ring_attention(q, q, q, key, False, 0.0)[0].shape == q.shape


# ---- tensor-parallel ops: out / gathered apart from the inputs, before the plan -----------------------------------

M, N, K = 512, 256, 384


def _pair(first, second, shared=8):
    """Two contiguous bf16 tensors of these shapes in one buffer, the second starting `shared` elements before
    the first ends (16-byte aligned both: only the overlap is wrong)."""
    n1, n2 = _numel(first), _numel(second)
    base = torch.empty(n1 + n2, dtype=BF16)
    return base[:n1].view(*first), base[n1 - shared:n1 - shared + n2].view(*second)


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def test_tp_ops_refuse_an_out_overlapping_their_inputs_before_the_plan(cuda_cpu):
    comm = cuda_cpu
    a, b, x = _empty(M, K), _empty(N, K), _empty(M, N)
    big = _empty(2 * M, N)
    b_o, out_b = _pair((N, K), (M, N))
    a_o, out_a = _pair((M // 2, K), (M, N))
    x_o, out_x = _pair((M, N), (M, N))
    cases = [
        # NCCL-style in place: the input is this rank's block of out
        (lambda: mkernel.all_gather(big[:M], comm, out=big), "all_gather: out overlaps a_local"),
        (lambda: mkernel.reduce_scatter(x, comm, out=x[:M // 2]), "reduce_scatter: out overlaps x"),
        (lambda: mkernel.gemm_rs(a, b, comm, out=a.view(-1)[:M // 2 * N].view(M // 2, N)), "gemm_rs: out overlaps a"),
        (lambda: mkernel.gemm_ar(_empty(M, K), b_o, comm, out=out_b), "gemm_ar: out overlaps b"),
        (lambda: mkernel.ag_gemm(a_o, b, comm, out=out_a), "ag_gemm: out overlaps a_local"),
        (lambda: mkernel.all_reduce(x_o, comm, out=out_x), "all_reduce: out overlaps x .*in place, the very same"),
    ]
    for call, pattern in cases:
        with pytest.raises(mkernel.MkernelError, match=pattern):
            call()
    with pytest.raises(Reached):  # in place, the very same tensor: all_reduce only (its library call allows it)
        mkernel.all_reduce(x, comm, out=x)
    with pytest.raises(Reached):  # well formed
        mkernel.gemm_rs(a, b, comm, out=_empty(M // 2, N))


def test_ag_gemm_refuses_a_gathered_overlapping_its_inputs_or_out(cuda_cpu):
    a_local, b = _empty(M // 2, K), _empty(N, K)
    key = tp._key(cuda_cpu)
    out, gathered = _pair((M, N), (M, K))
    with pytest.raises(mkernel.MkernelError, match="ag_gemm: gathered overlaps out"):
        tp._ag_gemm_run(a_local, b, key, out=out, gathered=gathered)
    b2, gathered = _pair((N, K), (M, K))
    with pytest.raises(mkernel.MkernelError, match="ag_gemm: gathered overlaps b"):
        tp._ag_gemm_run(a_local, b2, key, out=_empty(M, N), gathered=gathered)
    with pytest.raises(Reached):
        tp._ag_gemm_run(a_local, b, key, out=_empty(M, N), gathered=_empty(M, K))


@pytest.mark.parametrize("call,plan", [
    (lambda c: mkernel.ag_gemm(_empty(0, K), _empty(N, K), c), "AgGemm(0, 256, 384)"),  # a rank with no rows
    (lambda c: mkernel.ag_gemm(_empty(0, K), _empty(N, K), c, return_gathered=True), "AgGemm(0, 256, 384)"),
    (lambda c: mkernel.ag_gemm(_empty(M // 2, K), _empty(100, K), c), "AgGemm(256, 100, 384)"),
    (lambda c: mkernel.all_gather(_empty(0, K), c), "AgGemm(0, 64, 384)"),
    (lambda c: mkernel.all_gather(_empty(M // 2, 96), c), "AgGemm(256, 64, 96)"),
    (lambda c: mkernel.gemm_rs(_empty(385, K), _empty(N, K), c), "GemmRs(385, 256, 384)"),
    (lambda c: mkernel.gemm_rs(_empty(M, 96), _empty(N, 96), c), "GemmRs(512, 256, 96)"),
    (lambda c: mkernel.reduce_scatter(_empty(1, N), c), "GemmRs(1, 256, 64)"),
    (lambda c: mkernel.gemm_ar(_empty(0, K), _empty(N, K), c), "GemmAr(0, 256, 384)"),
    (lambda c: mkernel.all_reduce(_empty(M, 100), c), "GemmAr(512, 100, 64, 0, 0, 0)"),  # two-shot: no staging
])
def test_tp_ops_leave_the_sizes_their_plans_check_on_every_rank_to_the_plan(cuda_cpu, call, plan):
    # README: "when one rank's arguments are bad (say an uneven split left it no rows) ... every rank fails at once
    # with the same error naming the rank". The plan constructor checks rows, multiples of 64 and the split into row
    # blocks on every rank; refused here, on that rank alone, the others waited for it in the plan check until the
    # bootstrap bound and reported a missing rank. The fake implementations (no plan) still refuse them.
    pytest.importorskip("mkernel.tp_ar")
    with pytest.raises(Reached, match=re.escape(plan)):
        call(cuda_cpu)


def test_tp_ops_still_refuse_what_their_plans_cannot_see(cuda_cpu, monkeypatch):
    # b's columns against a's, a given out's shape: the plan takes one k and no out. On a shape's first call b against
    # a goes to the plan check first, with k -1 (test_first_call_refusals.py); with the plan made, it is refused here.
    with pytest.raises(Reached, match=re.escape("AgGemm(0, 256, -1)")):
        mkernel.ag_gemm(_empty(0, K), _empty(N, 320), cuda_cpu)
    monkeypatch.setitem(tp._PLANS, ("AgGemm", tp._key(cuda_cpu), (0, 256, K)), object())
    with pytest.raises(mkernel.MkernelError, match=r"ag_gemm: a_local is \[0, 384\] but b is \[256, 320\]"):
        mkernel.ag_gemm(_empty(0, K), _empty(N, 320), cuda_cpu)
    with pytest.raises(mkernel.MkernelError, match=r"must be a contiguous \[0, 256\] tensor"):
        mkernel.ag_gemm(_empty(0, K), _empty(N, K), cuda_cpu, out=_empty(2, N))


# ---- explicit plans: no backward -------------------------------------------------------------------------------

@pytest.mark.parametrize("cls,method,shape,args", [
    ("AgGemm", "run", (M // 2, N, K), [(M // 2, K), (N, K)]),
    ("AgGemm", "all_gather", (M // 2, N, K), [(M // 2, K)]),
    ("GemmRs", "run", (M, N, K), [(M, K), (N, K)]),
    ("GemmRs", "reduce_scatter", (M, N, K), [(M, N)]),
    ("GemmAr", "run", (M, N, K), [(M, K), (N, K)]),
    ("GemmAr", "all_reduce", (M, N, K), [(M, N)]),
])
def test_explicit_plans_refuse_inputs_that_require_grad(cuda_cpu, cls, method, shape, args):
    klass = getattr(mkernel, cls)
    p = klass.__new__(klass)
    p._h, p._device, p.world, p.shape = 1, -1, 2, shape
    launches = []
    for name in ("_launch", "_launch_all_gather", "_launch_reduce_scatter", "_launch_all_reduce"):
        setattr(p, name, lambda *t: launches.append(t) or t[-1])
    try:
        tensors = [_empty(*s) for s in args]
        tensors[0].requires_grad_()
        with pytest.raises(mkernel.MkernelError, match=f"mkernel.{cls}.{method}: no backward here"):
            getattr(p, method)(*tensors)
        assert not launches
        with torch.no_grad():
            getattr(p, method)(*tensors)
        assert len(launches) == 1
        # A forward-AD tangent (a dual tensor does not require grad): refused too, not dropped (before 2026-12-06
        # these methods launched and their output carried no tangent; the op functions refused it).
        import torch.autograd.forward_ad as fwAD
        plain = [t.detach() for t in tensors]
        with fwAD.dual_level():
            plain[0] = fwAD.make_dual(plain[0], torch.randn_like(plain[0]))
            with pytest.raises(mkernel.MkernelError, match=f"mkernel.{cls}.{method}: forward-mode AD"):
                getattr(p, method)(*plain)
        assert len(launches) == 1
    finally:
        p._h = None  # (no library handle to destroy)


# ---- gemm ------------------------------------------------------------------------------------------------------

@pytest.fixture
def gemm_calls(cuda_cpu, monkeypatch):
    calls = []
    monkeypatch.setattr(ops, "_launch_gemm", lambda a, b, out, m, n, k, ldo, ctas, dev: calls.append(
        (m, n, k, ldo, ctas)) or 0)
    monkeypatch.setattr(ops, "_mk_gemm", object())
    monkeypatch.setattr(ops, "_GEMM_WS", {})  # (a cached "no workspace" would call _mk_gemm directly)
    return calls


@pytest.mark.parametrize("ctas,pattern", [(2 ** 32, r"must be in \[0, 2147483647\]"), (-1, r"must be in \[0, "),
                                          (2.0, "must be an int"), (True, "must be an int"), ("8", "must be an int")])
def test_gemm_refuses_a_bad_num_compute_ctas(gemm_calls, ctas, pattern):
    a, b, out = _empty(128, 64), _empty(64, 64), _empty(128, 64)
    with pytest.raises(mkernel.MkernelError, match=f"mkernel.gemm: num_compute_ctas {pattern}"):
        mkernel.gemm(a, b, out=out, num_compute_ctas=ctas)
    with pytest.raises(mkernel.MkernelError, match=f"mkernel.gemm: num_compute_ctas {pattern}"):
        mkernel.gemm(a, b, num_compute_ctas=ctas)
    assert not gemm_calls
    import numpy as np
    mkernel.gemm(a, b, out=out, num_compute_ctas=np.int64(8))
    assert gemm_calls == [(128, 64, 64, 64, 8)]


@pytest.mark.parametrize("a_shape,b_shape", [((128, 0), (64, 0)), ((128, 64), (100, 64)), ((128, 96), (64, 96))])
def test_gemm_names_the_n_and_k_rule_where_python_checks(gemm_calls, a_shape, b_shape):
    # Traced (the fake implementation checks nothing: said at trace time) and with autograd (the custom op would
    # index shapes first); k = 0 eagerly too (it used to read "must be contiguous"). Other eager calls: the
    # library's own message ("gemm: n must be a positive multiple of 64"). "cuda:0", not "cuda": where CUDA is
    # initialised (a GPU machine), FakeTensorMode names a bare "cuda" by torch.cuda.current_device(), which the
    # cuda_cpu fixture makes -1 (session 69: "Invalid device string: 'cuda:-1'" there).
    from torch._subclasses.fake_tensor import FakeTensorMode
    rule = "mkernel.gemm: n and k must be positive multiples of 64"
    with FakeTensorMode():
        fa, fb = (torch.empty(*s, dtype=BF16, device="cuda:0") for s in (a_shape, b_shape))
        with pytest.raises(mkernel.MkernelError, match=rule):
            mkernel.gemm(fa, fb)
    with pytest.raises(mkernel.MkernelError, match=rule):
        mkernel.gemm(_empty(*a_shape).requires_grad_(), _empty(*b_shape))
    if a_shape[1] == 0:
        with pytest.raises(mkernel.MkernelError, match=rule):
            mkernel.gemm(_empty(*a_shape), _empty(*b_shape))
    assert not gemm_calls


def test_gemm_with_no_rows_returns_an_empty_result_without_a_launch(gemm_calls):
    out = mkernel.gemm(_empty(0, 64), _empty(128, 64))
    assert out.shape == (0, 128) and out.dtype == BF16
    mkernel.gemm(_empty(0, 64), _empty(128, 64), out=_empty(0, 128))
    assert not gemm_calls


def test_gemm_one_row_out_of_any_stride_reaches_the_library_with_an_even_one(gemm_calls):
    out = _empty(2, 193)[:1, :64]  # one row, row stride 193 (odd: the library would refuse it)
    mkernel.gemm(_empty(1, 64), _empty(64, 64), out=out)
    assert gemm_calls == [(1, 64, 64, 64, 0)]


def test_gemm_out_of_an_odd_row_stride_is_refused_in_outs_terms(gemm_calls):
    # (the library's message names ldo, an argument a Python caller never passes)
    with pytest.raises(mkernel.MkernelError, match=r"out's row stride must be even \(got strides \(193, 1\)"):
        mkernel.gemm(_empty(4, 64), _empty(64, 64), out=_empty(4, 193)[:, :64])
    assert not gemm_calls


def test_gemm_one_row_calls_take_the_fast_path(gemm_calls, monkeypatch):
    # (decode: m = 1 in the steady state; the full checks cost ~3 us there)
    checked = []
    monkeypatch.setattr(ops, "_validate_gemm", lambda *a: checked.append(1))
    mkernel.gemm(_empty(1, 64), _empty(64, 64), out=_empty(1, 64))
    assert not checked and gemm_calls == [(1, 64, 64, 64, 0)]


@pytest.mark.parametrize("ctas", [0.0, None])
def test_gemm_refuses_a_falsy_num_compute_ctas_that_is_not_an_int(gemm_calls, ctas):
    with pytest.raises(mkernel.MkernelError, match="num_compute_ctas must be an int"):
        mkernel.gemm(_empty(128, 64), _empty(64, 64), out=_empty(128, 64), num_compute_ctas=ctas)


def test_gemm_autograd_path_checks_before_the_custom_op(cuda_cpu):
    a = torch.tensor(1.0, dtype=BF16, requires_grad=True)
    with pytest.raises(mkernel.MkernelError, match="mkernel.gemm: a must be 2-D"):
        mkernel.gemm(a, _empty(64, 64))


def test_check_apart_compares_byte_ranges():
    x = torch.empty(64, dtype=BF16)
    ok = torch.empty(64, dtype=BF16)
    _tp_plans.check_apart("op", "out", ok, ("x", x))
    _tp_plans.check_apart("op", "out", x[32:], ("x", x[:32]))  # adjacent, not overlapping
    with pytest.raises(mkernel.MkernelError, match="op: out overlaps x in memory"):
        _tp_plans.check_apart("op", "out", x[31:], ("x", x[:32]))
    _tp_plans.check_apart("op", "out", x, ("x", x), same_ok=True)
    with pytest.raises(mkernel.MkernelError, match="in place, the very same tensor, is allowed"):
        _tp_plans.check_apart("op", "out", x[:32], ("x", x), same_ok=True)
    _tp_plans.check_apart("op", "out", None, ("x", x))
    _tp_plans.check_apart("op", "out", x, ("x", None))


@pytest.mark.parametrize("ws_bytes", [0, 4096])
def test_gemm_queries_the_capture_state_only_where_a_workspace_is_needed(cuda_cpu, monkeypatch, ws_bytes):
    # Host cost: the capture query (~0.3 us) is made only for dimensions whose call takes per-call scratch (the
    # library's answer, cached per dimensions and device); the others go straight to the library.
    queries, launched, asked = [], [], []
    monkeypatch.setattr(ops, "_GEMM_WS", {})
    monkeypatch.setattr(ops, "_capturing", lambda: queries.append(1) or False)
    monkeypatch.setattr(ops, "_mk_gemm", lambda *a: launched.append(a[3:8]) or 0)
    monkeypatch.setattr(ops, "_stream", lambda dev: 0)
    monkeypatch.setattr(ops, "workspace_bytes", lambda symbol, op, *dims: asked.append(dims) or ws_bytes)
    a, b, out = _empty(128, 64), _empty(64, 64), _empty(128, 64)
    for _ in range(3):
        mkernel.gemm(a, b, out=out, num_compute_ctas=8)
    assert launched == [(128, 64, 64, 64, 8)] * 3
    assert asked == [(128, 64, 64, 8)], "the library's answer is asked once per dimensions"
    assert len(queries) == (3 if ws_bytes else 0)


# ---- the communicator and the pointer-level API: C ints checked, handles not leaked -----------------------------

@pytest.mark.parametrize("kw,pattern", [({"rank": 2 ** 32}, r"rank must be in \[-2147483648, 2147483647\]"),
                                        ({"rank": 0.5}, "rank must be an int"),
                                        ({"world": 2 ** 32 + 1}, "world must be in"),
                                        ({"world": 0}, r"world must be in \[1, "),
                                        ({"device": "0"}, "device must be an int")])
def test_communicator_checks_its_ints_before_the_library(monkeypatch, kw, pattern):
    called = []
    monkeypatch.setattr(mkernel.lib, "mk_comm_init", lambda *a: called.append(a) or 0)
    args = {"rank": 0, "world": 2, "unique_id": b"\0" * 128, "device": 0}
    args.update(kw)
    with pytest.raises(mkernel.MkernelError, match="mkernel.Communicator: " + pattern):
        mkernel.Communicator(**args)
    assert not called, "2**32 reached ctypes, which wraps it to 0 (rank 0 joined as rank 0 of another job)"


def test_communicator_destroys_its_handle_when_adopting_it_fails(monkeypatch):
    destroyed = []

    def init(h, rank, world, uid, device):
        h._obj.value = 1234
        return 0
    monkeypatch.setattr(mkernel.lib, "mk_comm_init", init)
    monkeypatch.setattr(mkernel.lib, "mk_comm_destroy", lambda h: destroyed.append(h) or 0)
    monkeypatch.setattr(mkernel.Communicator, "world", property(lambda self: 2))
    monkeypatch.setattr(mkernel._tp_meta, "new_key", lambda w: (_ for _ in ()).throw(mkernel.MkernelError("no key")))
    with pytest.raises(mkernel.MkernelError, match="no key"):
        mkernel.Communicator(0, 2, b"\0" * 128, 0)
    assert len(destroyed) == 1 and destroyed[0].value == 1234


@pytest.mark.parametrize("nbytes,sent", [(-5, 0), (0, 0), (2 ** 70, 2 ** 64 - 1), (2 ** 200, 2 ** 64 - 1),
                                         (-(2 ** 200), 0), (4096, 4096)])
def test_alloc_symmetric_sends_every_size_to_the_library_exchange(monkeypatch, nbytes, sent):
    # (a bad size on one rank must fail every rank in the library's size exchange, not this rank alone; every
    # int is a size, 2**200 too, which was refused here; what is not an int has none to send, and is refused here)
    seen = []
    monkeypatch.setattr(mkernel.lib, "mk_symm_alloc", lambda h, n, out: seen.append(n) or 1)
    monkeypatch.setattr(mkernel.lib, "mk_last_error", lambda: b"mkernel: alloc_symmetric: refused by the test double")
    comm = mkernel.Communicator.__new__(mkernel.Communicator)
    comm._h = ctypes.c_void_p(1)
    with pytest.raises(mkernel.MkernelError, match="refused by the test double"):
        comm.alloc_symmetric(nbytes)
    assert seen == [sent]
    for not_int in (1.5, "4096", True):
        with pytest.raises(mkernel.MkernelError, match="mkernel.alloc_symmetric: nbytes must be an int"):
            comm.alloc_symmetric(not_int)
    assert seen == [sent]


@pytest.mark.parametrize("args,pattern", [(("not a pointer", 16, 32, 64, 64, 64), "a must be an int"),
                                          ((b"bytes", 16, 32, 64, 64, 64), "a must be an int"),
                                          ((16, 32, 48, 2 ** 64 + 64, 64, 64), r"m must be in"),
                                          ((16, 32, 48, 64, 64.0, 64), "n must be an int"),
                                          ((-16, 32, 48, 64, 64, 64), r"a must be in \[0, "),
                                          ((16, 2 ** 64, 48, 64, 64, 64), r"b must be in \[0, "),
                                          ((16, 32, True, 64, 64, 64), "out must be an int"),
                                          ((16, 32, 48, 64, 64, 64, 0, 2 ** 31), "num_compute_ctas must be in"),
                                          ((16, 32, 48, 64, 64, 64, 0, -1), "num_compute_ctas must be in")])
def test_gemm_ptr_checks_its_arguments_before_ctypes(monkeypatch, args, pattern):
    called = []
    from mkernel import _ops_c
    monkeypatch.setattr(_ops_c, "_need", lambda symbol, op: lambda *a: called.append(a) or 0)
    with pytest.raises(mkernel.MkernelError, match="mkernel.gemm_ptr: " + pattern):
        mkernel.gemm_ptr(*args)
    assert not called
    mkernel.gemm_ptr(16, 32, 48, 64, 64, 64, num_compute_ctas=8)
    assert called == [(16, 32, 48, 64, 64, 64, 0, 8, 0)]


@pytest.mark.parametrize("args,pattern", [((1024.0, 256, 8192), "m must be an int"),
                                          ((1024, 2 ** 64 + 128, 8192), r"n must be in \[-9223372036854775808, "),
                                          ((1024, 256, "8192"), "k must be an int"),
                                          ((1024, 256, 8192, 2 ** 32 + 8), r"num_compute_ctas must be in \[0, "),
                                          ((1024, 256, 8192, -1), r"num_compute_ctas must be in \[0, "),
                                          ((1024, 256, 8192, 8.0), "num_compute_ctas must be an int")])
def test_gemm_workspace_bytes_checks_its_arguments_before_ctypes(monkeypatch, args, pattern):
    # (a float reached ctypes as a bare ArgumentError, and 2**64 + 128 arrived as 128 without a word)
    called = []
    from mkernel import _ops_c
    monkeypatch.setattr(_ops_c, "_need", lambda symbol, op: lambda *a: called.append(a[:-1]) or 0)
    with pytest.raises(mkernel.MkernelError, match="mkernel.gemm_workspace_bytes: " + pattern):
        mkernel.gemm_workspace_bytes(*args)
    assert not called
    np = pytest.importorskip("numpy")
    assert mkernel.gemm_workspace_bytes(np.int64(1024), 256, 8192, num_compute_ctas=8) == 0
    assert called == [(1024, 256, 8192, 8)] and all(type(v) is int for v in called[0])


def test_gemm_ptr_passes_what_its_fast_check_sends_to_the_detailed_one(monkeypatch):
    # (numpy ints and a negative dimension leave the one-expression check; the detailed one takes them, and the
    # library names the bad dimension)
    np = pytest.importorskip("numpy")
    called = []
    from mkernel import _ops_c
    monkeypatch.setattr(_ops_c, "_need", lambda symbol, op: lambda *a: called.append(a) or 0)
    mkernel.gemm_ptr(np.int64(16), 32, 48, 64, np.uint64(64), 64, stream=2 ** 64 - 1)
    mkernel.gemm_ptr(16, 32, 48, -1, 64, 64)
    assert called == [(16, 32, 48, 64, 64, 64, 0, 0, 2 ** 64 - 1), (16, 32, 48, -1, 64, 64, 0, 0, 0)]
    assert all(type(v) is int for call in called for v in call)


@pytest.mark.parametrize("scale,sent", [(None, 0.0), (0.125, 0.125), (__import__("numpy").float32(0.5), 0.5)])
def test_ring_attention_plan_takes_scale_as_the_op_does(monkeypatch, scale, sent):
    # (None: 1/sqrt(head_dim), sent as 0.0; else scale_arg's rule)
    seen = []
    monkeypatch.setattr(_ring_attention, "_need", lambda symbol, op: lambda *a: seen.append(a[7]) or 1)
    monkeypatch.setattr(mkernel.lib, "mk_last_error", lambda: b"mkernel: refused by the test double")
    with pytest.raises(mkernel.MkernelError, match="refused by the test double"):
        mkernel.RingAttention(FakeComm(world=2), 1, 128, 8, 8, 128, True, scale=scale)
    assert seen == [sent] and type(seen[0]) is float


@pytest.mark.parametrize("scale", [0, 0.0, -1.0, float("nan"), float("inf"), "0.1", True, 1e300, 3e38])
def test_ring_attention_plan_refuses_a_bad_scale_before_the_library(monkeypatch, scale):
    monkeypatch.setattr(_ring_attention, "_need", lambda symbol, op: lambda *a: pytest.fail("reached the library"))
    with pytest.raises(mkernel.MkernelError, match="mkernel.RingAttention: scale must be a finite number > 0"):
        mkernel.RingAttention(FakeComm(world=2), 1, 128, 8, 8, 128, True, scale=scale)


_PLANS = {"AgGemm": (tp, ("m_local", "n", "k"), ("num_comm_ctas", "num_ctas")),
          "GemmRs": (tp, ("m", "n", "k_local"), ("num_reduce_ctas", "num_ctas")),
          "GemmAr": (tp_ar, ("m", "n", "k_local"), ("num_gather_ctas", "num_ctas"))}


def _recording_plan(monkeypatch, plan):
    """(class, dimension names, CTA names, good dimensions, sent): the plan's library call replaced by a test double
    that records the arguments it got in `sent` and fails, saying "refused by the test double"."""
    mod, dims, ctas = _PLANS[plan]
    sent = []
    monkeypatch.setattr(mod, "_need", lambda symbol, op: lambda *a: sent.append(a[1:-1]) or 1)
    monkeypatch.setattr(mkernel.lib, "mk_last_error", lambda: b"mkernel: refused by the test double")
    return getattr(mkernel, plan), dims, ctas, dict(zip(dims, (4096, 8192, 1024))), sent


@pytest.mark.parametrize("plan", sorted(_PLANS))
def test_plan_constructors_refuse_what_ctypes_would_wrap_or_truncate(monkeypatch, plan):
    # ctypes took 2**32 + 4 CTAs as 4, m_local = 0.5 as 0 and 2**64 + 128 rows as 128 without a word (the plan then
    # refused every run() with a confusing shape error): each argument is checked before the library call, as an
    # int of its C type (int64 dimensions, int CTA counts).
    cls, dims, ctas, good, sent = _recording_plan(monkeypatch, plan)
    for name, bad in [(dims[0], 2 ** 64 + 128), (dims[1], 0.5), (dims[2], -(2 ** 63) - 1), (dims[0], True),
                      (ctas[0], 2 ** 32 + 4), (ctas[1], -(2 ** 31) - 1), (ctas[1], 1.0)]:
        with pytest.raises(mkernel.MkernelError, match=f"mkernel.{plan}: {name} must be"):
            cls(FakeComm(world=2), **{**good, name: bad})
    assert sent == []
    with pytest.raises(mkernel.MkernelError, match="refused by the test double"):  # good ones reach it as ints
        cls(FakeComm(world=2), **good, **{ctas[0]: __import__("numpy").int64(3)})
    # (GemmAr's one_shot last: -1, the crossover's choice, by default)
    assert sent == [(4096, 8192, 1024, 3, 0) + ((-1,) if plan == "GemmAr" else ())]
    assert all(type(v) is int for v in sent[0])


def test_gemm_ar_one_shot_reaches_the_library_as_a_c_int(monkeypatch):
    # one_shot (-1, 0, 1) is the plan's to check on every rank (a 5 reaches it); what ctypes would wrap does not
    cls, dims, ctas, good, sent = _recording_plan(monkeypatch, "GemmAr")
    for bad in (2 ** 32 + 1, 0.0, True):
        with pytest.raises(mkernel.MkernelError, match="mkernel.GemmAr: one_shot must be"):
            cls(FakeComm(world=2), **good, one_shot=bad)
    for value in (0, 1, 5):
        with pytest.raises(mkernel.MkernelError, match="refused by the test double"):
            cls(FakeComm(world=2), **good, one_shot=value)
    assert [a[-1] for a in sent] == [0, 1, 5]


@pytest.mark.parametrize("plan", sorted(_PLANS))
def test_plan_constructors_leave_the_values_the_library_checks_on_every_rank_to_it(monkeypatch, plan):
    # A rank with no rows (an uneven split), a negative size or CTA count: the plan constructor checks these on every
    # rank at once and names the rank; refused here, on one rank, the others waited for it in the plan check until
    # the bootstrap bound (MK_BOOTSTRAP_TIMEOUT_MS) and then reported a missing rank.
    cls, dims, ctas, good, sent = _recording_plan(monkeypatch, plan)
    cases = [(dims[0], 0), (dims[1], 100), (dims[2], -64), (ctas[0], -1), (ctas[1], -(2 ** 31))]
    for name, value in cases:
        with pytest.raises(mkernel.MkernelError, match="refused by the test double"):
            cls(FakeComm(world=2), **{**good, name: value})
    assert len(sent) == len(cases)
    for (name, value), args in zip(cases, sent):
        assert args[(dims + ctas).index(name)] == value


def test_ring_attention_plan_refuses_what_ctypes_would_wrap(monkeypatch):
    monkeypatch.setattr(_ring_attention, "_need", lambda symbol, op: lambda *a: pytest.fail("reached the library"))
    for kw in (dict(batch=2 ** 64 + 1), dict(head_dim=128.0), dict(num_comm_ctas=2 ** 32 + 2),
               dict(num_ctas=-(2 ** 31) - 1)):
        args = {**dict(batch=1, s_local=128, heads=8, kv_heads=8, head_dim=128, causal=True), **kw}
        with pytest.raises(mkernel.MkernelError, match=f"mkernel.RingAttention: {next(iter(kw))} must be"):
            mkernel.RingAttention(FakeComm(world=2), **args)


def test_ring_attention_plan_leaves_the_values_the_library_checks_on_every_rank_to_it(monkeypatch):
    # (as the tensor-parallel plans': an empty or odd causal shard on one rank fails every rank in the plan check)
    sent = []
    monkeypatch.setattr(_ring_attention, "_need", lambda symbol, op: lambda *a: sent.append(a[1:6] + a[8:10]) or 1)
    monkeypatch.setattr(mkernel.lib, "mk_last_error", lambda: b"mkernel: refused by the test double")
    base = dict(batch=1, s_local=128, heads=8, kv_heads=8, head_dim=128, causal=True)
    cases = (dict(s_local=0), dict(s_local=127), dict(batch=-1), dict(kv_heads=-2), dict(head_dim=96),
             dict(num_ctas=-3), dict(num_comm_ctas=-1))
    for kw in cases:
        with pytest.raises(mkernel.MkernelError, match="refused by the test double"):
            mkernel.RingAttention(FakeComm(world=2), **{**base, **kw})
    names = ("batch", "s_local", "heads", "kv_heads", "head_dim", "num_comm_ctas", "num_ctas")
    assert len(sent) == len(cases)
    for kw, args in zip(cases, sent):
        (name, value), = kw.items()
        assert args[names.index(name)] == value


# ---- plans made by hand: a closed communicator, a closed plan --------------------------------------------------

_HAND_MADE = [("AgGemm", tp, (4096, 8192, 1024)), ("GemmRs", tp, (4096, 8192, 1024)),
              ("GemmAr", tp_ar, (4096, 8192, 1024)), ("RingAttention", _ring_attention, (1, 128, 8, 8, 128, True))]


@pytest.mark.parametrize("plan,mod,args", _HAND_MADE, ids=[p[0] for p in _HAND_MADE])
def test_hand_made_plans_refuse_a_closed_communicator_or_another_object(monkeypatch, plan, mod, args):
    # comm._h went to the library unchecked: a closed communicator gave "comm or out is NULL", another object an
    # AttributeError
    monkeypatch.setattr(mod, "_need", lambda symbol, op: lambda *a: pytest.fail("reached the library"))
    closed = mkernel.Communicator.__new__(mkernel.Communicator)
    closed._h = None  # as close() leaves it
    for comm in (closed, object(), None):
        with pytest.raises(mkernel.MkernelError,
                           match=f"mkernel.{plan}: the communicator is closed \\(or is not a mkernel.Communicator\\)"):
            getattr(mkernel, plan)(comm, *args)


def _closed_ring_plan():
    p = mkernel.RingAttention.__new__(mkernel.RingAttention)
    p._h = None  # as close() leaves it
    return p


def test_ring_attention_trace_checks_events_per_cta_and_a_closed_plan(monkeypatch):
    # events_per_cta went through int() (2.7 -> 2, "8" -> 8, 2**32 + 8 -> wrapped by ctypes), and a closed plan
    # reached the library as NULL ("plan is NULL")
    calls = []
    monkeypatch.setattr(mkernel.lib, "mk_ring_attn_trace", lambda h, n: calls.append((h, n)) or 0, raising=False)
    p = mkernel.RingAttention.__new__(mkernel.RingAttention)
    p._h = 1234
    for bad, pattern in [(2.7, "must be an int"), ("8", "must be an int"), (True, "must be an int"),
                         (2 ** 32 + 8, r"must be in \[0, 1048576\]"), (-1, r"must be in \[0, 1048576\]"),
                         ((1 << 20) + 1, r"must be in \[0, 1048576\]")]:
        with pytest.raises(mkernel.MkernelError, match="mkernel.RingAttention.enable_trace: events_per_cta " + pattern):
            p.enable_trace(bad)
    assert calls == []
    p.enable_trace(__import__("numpy").int32(1 << 20))
    p.enable_trace(0)
    assert calls == [(1234, 1 << 20), (1234, 0)] and p._trace_cap == 0
    for call in (lambda: _closed_ring_plan().enable_trace(16), lambda: _closed_ring_plan().read_trace()):
        with pytest.raises(mkernel.MkernelError, match="mkernel.RingAttention: the plan is closed"):
            call()
    assert len(calls) == 2


def test_ring_attention_plan_run_checks_alignment_and_overlaps_under_a_dispatch_mode(cuda_cpu, monkeypatch):
    # traced() is true under any TorchDispatchMode, and run() skipped its alignment and overlap checks there, though
    # a plan's run launches at once on real tensors (FlopCounterMode, memory trackers): the library then refused the
    # call on that rank alone, its peers waiting until MK_TIMEOUT_MS.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    p = mkernel.RingAttention.__new__(mkernel.RingAttention)
    p._h, p._device, p.world, p.shape, p.causal = 1234, -1, 2, (1, 128, 2, 2, 64), False
    monkeypatch.setattr(mkernel.RingAttention, "_launch", lambda self, *a: (_ for _ in ()).throw(Reached("launched")))
    q, k, v = _empty(1, 128, 2, 64), _empty(1, 128, 2, 64), _empty(1, 128, 2, 64)
    for mode in (None, Passing):
        with (mode() if mode else contextlib.nullcontext()):
            with pytest.raises(mkernel.MkernelError, match="RingAttention.run: q must start at a 16-byte aligned"):
                p.run(_misaligned(1, 128, 2, 64), k, v)
            with pytest.raises(mkernel.MkernelError, match="RingAttention.run: out overlaps q"):
                p.run(q, k, v, out=q)
            with pytest.raises(Reached):  # well formed: launched
                p.run(q, k, v)
    import torch.autograd.forward_ad as fwAD  # a forward-AD tangent is still refused (traced()'s check)
    with fwAD.dual_level():
        with pytest.raises(mkernel.MkernelError, match="forward-mode AD"):
            p.run(fwAD.make_dual(q, torch.randn_like(q)), k, v)


def test_ring_attention_device_error_names_the_current_device_and_the_communicators(cuda_cpu, monkeypatch):
    # It called the current device "the communicator's" without reading the communicator (here cuda:1).
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(_tp_plans, "_get_device", lambda: 0)
    cuda_cpu._device = 1
    q = _empty(1, 128, 2, 64)  # (a CPU tensor: get_device() -1)
    with pytest.raises(mkernel.MkernelError, match=r"mkernel.ring_attention: q is on cuda:-1 and the current device "
                                                   r"is cuda:0; the communicator's is cuda:1"):
        _ring(cuda_cpu, q)
