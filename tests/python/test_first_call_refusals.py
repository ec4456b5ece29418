"""Tensors that do not match each other, refused on one rank on a shape's first call, reach the plan check first.

A plan takes each size once, so it cannot see b's columns against a's (ag_gemm, gemm_rs, gemm_ar) or ring attention's
k and v against q and each other; Python refuses those. Refused on one rank alone before the plan, while the other
ranks (the same calls, no plan cached yet) made that plan, whose check is collective, they waited in it for that rank
until the bootstrap bound (MK_BOOTSTRAP_TIMEOUT_MS, 60 s) and then reported it missing. The refusing rank now takes
part in the plan check with the size in question as -1, which every plan constructor refuses, so every rank fails at
once naming it; it then raises its own error, unchanged (the plan check's error chained). With the plan cached, the
others make none: the refusal stays at once and local (they wait in the kernel until MK_TIMEOUT_MS).

No GPU: test_bad_input's fake_gpu (CPU tensors stand in for CUDA ones) with the real plan cache; the library's plan
constructors are test doubles that record their sizes and fail as the library's plan check does."""
import pytest

from torchops import torch_ops  # noqa: E402

torch = torch_ops()  # (torch >= 2.4, or the module skips saying why)

import mkernel  # noqa: E402
from mkernel import _ring_attention, tp, tp_ar  # noqa: E402
from test_bad_input import _PLAN, _empty, fake_gpu  # noqa: E402

M, N, K = 512, 256, 384
PLAN_CHECK = "rank 1 could not make its plan"


@pytest.fixture
def made(monkeypatch):
    """A 2-rank FakeComm with the real plan cache, whose library constructors record (symbol, sizes) in
    made.sizes and fail as the plan check does when a rank refused (the sizes: the plan's int64 dimensions)."""
    comm = fake_gpu(monkeypatch)
    monkeypatch.delenv("MK_PLAN_CACHE_MAX", raising=False)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    sizes = []

    def need(symbol, op):
        n = 5 if symbol == "mk_ring_attn_create" else 3  # (batch, s_local, heads, kv_heads, head_dim; m, n, k)
        return lambda *a: sizes.append((symbol, tuple(a[1:1 + n]))) or 1

    for mod in (tp, tp_ar, _ring_attention):
        monkeypatch.setattr(mod, "_plan", _PLAN)  # (fake_gpu's stops before the plan)
        monkeypatch.setattr(mod, "_need", need)
    monkeypatch.setattr(mkernel.lib, "mk_last_error", lambda: (
        f"the plan check: {PLAN_CHECK}: a size must be >= 1 (got -1)".encode()))
    comm.sizes = sizes
    yield comm
    assert not [k for k in tp._PLANS if k[1] == comm._uid], "a refused call left a plan in the cache"


def _refused(call):
    """The MkernelError that call() raises."""
    with pytest.raises(mkernel.MkernelError) as e:
        call()
    return e.value


def _pair_says(op, a_name, a, b):
    """The shape rules' error for b's columns against a's (mkernel/_tp_meta.py's _pair)."""
    (m, k), (n, kb) = a, b
    return (f"mkernel.{op}: {a_name} is [{m}, {k}] but b is [{n}, {kb}]; b must be [n, {k}] "
            "(torch.nn.Linear weight layout)")


# ---- tensor-parallel ops: b's columns against a's ---------------------------------------------------------------

def _key(comm):
    return tp._key(comm)


TP_CALLS = {  # name: (call, op, a's name, plan class, its library constructor, a's shape, b's shape)
    "gemm_rs": (lambda c, a, b: mkernel.gemm_rs(a, b, c), "gemm_rs", "a", "GemmRs", "mk_gemm_rs_create",
                (M, K), (N, 320)),
    "gemm_rs_a": (lambda c, a, b: mkernel.gemm_rs(a, b, c), "gemm_rs", "a", "GemmRs", "mk_gemm_rs_create",
                  (M, 320), (N, K)),  # (a's columns the odd ones)
    "gemm_rs_out": (lambda c, a, b: mkernel.gemm_rs(a, b, c, out=_empty(M // 2, N)), "gemm_rs", "a", "GemmRs",
                    "mk_gemm_rs_create", (M, K), (N, 320)),
    "gemm_rs_op": (lambda c, a, b: torch.ops.mkernel.gemm_rs(a, b, _key(c)), "gemm_rs", "a", "GemmRs",
                   "mk_gemm_rs_create", (M, K), (N, 320)),
    "ag_gemm": (lambda c, a, b: mkernel.ag_gemm(a, b, c), "ag_gemm", "a_local", "AgGemm", "mk_ag_gemm_create",
                (M // 2, K), (N, 320)),
    "ag_gemm_gathered": (lambda c, a, b: mkernel.ag_gemm(a, b, c, return_gathered=True), "ag_gemm", "a_local",
                         "AgGemm", "mk_ag_gemm_create", (M // 2, K), (N, 320)),
    "gemm_ar": (lambda c, a, b: mkernel.gemm_ar(a, b, c), "gemm_ar", "a", "GemmAr", "mk_gemm_ar_create_ex",
                (M, K), (N, 320)),
    "gemm_ar_op": (lambda c, a, b: torch.ops.mkernel.gemm_ar(a, b, _key(c)), "gemm_ar", "a", "GemmAr",
                   "mk_gemm_ar_create_ex", (M, K), (N, 320)),
}


@pytest.mark.parametrize("case", sorted(TP_CALLS))
def test_tp_ops_send_a_mismatched_b_to_the_plan_check_on_a_first_call(made, case):
    call, op, a_name, _, symbol, a_shape, b_shape = TP_CALLS[case]
    e = _refused(lambda: call(made, _empty(*a_shape), _empty(*b_shape)))
    assert str(e) == _pair_says(op, a_name, a_shape, b_shape)  # this rank's error, as before
    assert isinstance(e.__cause__, mkernel.MkernelError) and PLAN_CHECK in str(e.__cause__)  # the check's, chained
    assert made.sizes == [(symbol, (a_shape[0], b_shape[0], -1))]  # every rank's plan check got k -1 from this one


@pytest.mark.parametrize("case", sorted(TP_CALLS))
def test_tp_ops_refuse_a_mismatched_b_at_once_where_the_plan_is_cached(made, monkeypatch, case):
    # A cached plan: the other ranks make none (they launch), so there is no plan check to take part in.
    call, op, a_name, cls, _, a_shape, b_shape = TP_CALLS[case]
    for k in (a_shape[1], b_shape[1]):  # the plan the call means, with a's k or with b's
        with monkeypatch.context() as m:
            m.setitem(tp._PLANS, (cls, _key(made), (a_shape[0], b_shape[0], k)), object())
            e = _refused(lambda: call(made, _empty(*a_shape), _empty(*b_shape)))
        assert str(e) == _pair_says(op, a_name, a_shape, b_shape) and e.__cause__ is None
    assert made.sizes == []


def test_tp_ops_make_well_formed_and_other_first_plans_as_before(made):
    # (the plan gets the call's own sizes; a bad size is the plan's to refuse, on every rank: no -1)
    for call in (lambda: mkernel.gemm_rs(_empty(M, K), _empty(N, K), made),
                 lambda: mkernel.ag_gemm(_empty(0, K), _empty(N, K), made),
                 lambda: mkernel.gemm_ar(_empty(M, 96), _empty(N, 96), made)):
        assert str(_refused(call)).startswith("the plan check: " + PLAN_CHECK)
    assert made.sizes == [("mk_gemm_rs_create", (M, N, K)), ("mk_ag_gemm_create", (0, N, K)),
                          ("mk_gemm_ar_create_ex", (M, N, 96))]


# ---- ring attention: k and v against q and each other -----------------------------------------------------------

Q = (1, 128, 2, 64)
RING_CASES = {  # name: (k shape, v shape, this rank's error, the sizes its plan check gets)
    "positions": ((1, 64, 2, 64), (1, 64, 2, 64),
                  "mkernel.ring_attention: k and v hold 64 positions per sequence and q 128: each rank's K/V shard "
                  "must cover the same positions as its Q shard (s_local rows; causal: zigzag_shard of each)",
                  (1, -1, 2, 2, 64)),
    "k_v_heads": ((1, 128, 2, 64), (1, 128, 1, 64),
                  "mkernel.ring_attention: k (1, 128, 2, 64) and v (1, 128, 1, 64) differ", (1, 128, 2, -1, 64)),
    "k_v_positions": ((1, 128, 2, 64), (1, 64, 2, 64),
                      "mkernel.ring_attention: k (1, 128, 2, 64) and v (1, 64, 2, 64) differ", (1, -1, 2, 2, 64)),
    "batch": ((2, 128, 2, 64), (2, 128, 2, 64),
              "mkernel.ring_attention: k is (2, 128, 2, 64); it must be [1, seq_kv, kv_heads, 64] for q "
              "(1, 128, 2, 64)", (-1, 128, 2, 2, 64)),
    "head_dim": ((1, 128, 2, 128), (1, 128, 2, 128),
                 "mkernel.ring_attention: k is (1, 128, 2, 128); it must be [1, seq_kv, kv_heads, 64] for q "
                 "(1, 128, 2, 64)", (1, 128, 2, 2, -1)),
}


def _ring_calls(comm):
    key = _key(comm)
    return {"eager": lambda q, k, v, causal: mkernel.ring_attention(q, k, v, comm, causal=causal),
            "op": lambda q, k, v, causal: torch.ops.mkernel.ring_attention(q, k, v, key, causal, 0.0)}


@pytest.mark.parametrize("path", ["eager", "op"])
@pytest.mark.parametrize("case", sorted(RING_CASES))
def test_ring_attention_sends_mismatched_k_v_to_the_plan_check_on_a_first_call(made, case, path):
    k_shape, v_shape, says, sent = RING_CASES[case]
    call = _ring_calls(made)[path]
    for causal in (False, True):
        e = _refused(lambda: call(_empty(*Q), _empty(*k_shape), _empty(*v_shape), causal))
        assert str(e) == says
        assert isinstance(e.__cause__, mkernel.MkernelError) and PLAN_CHECK in str(e.__cause__)
    assert made.sizes == [("mk_ring_attn_create", sent)] * 2


@pytest.mark.parametrize("case", sorted(RING_CASES))
def test_ring_attention_refuses_mismatched_k_v_at_once_where_the_plan_is_cached(made, monkeypatch, case):
    # A cached plan: the other ranks make none (they launch), so there is no plan check to take part in.
    k_shape, v_shape, says, _ = RING_CASES[case]
    key = _key(made)
    for call in _ring_calls(made).values():
        with monkeypatch.context() as m:  # (the plan the call means: q's sizes, k's kv heads)
            m.setitem(tp._PLANS, ("RingAttention", key, (1, 128, 2, k_shape[2], 64, False, None)), object())
            e = _refused(lambda: call(_empty(*Q), _empty(*k_shape), _empty(*v_shape), False))
        assert str(e) == says and e.__cause__ is None
    assert made.sizes == []


def test_ring_attention_under_a_mode_that_runs_the_op_sends_mismatched_k_v_to_the_plan_check(made):
    # FlopCounterMode counts and runs the op at once (its plan is made now): the same as an eager call. The fake
    # implementation (meta tensors: traced, no plan) refuses on its own, as before.
    from torch.utils.flop_counter import FlopCounterMode
    k_shape, v_shape, says, sent = RING_CASES["positions"]
    with FlopCounterMode(display=False):
        e = _refused(lambda: mkernel.ring_attention(_empty(*Q), _empty(*k_shape), _empty(*v_shape), made))
    assert str(e) == says and PLAN_CHECK in str(e.__cause__)
    assert made.sizes == [("mk_ring_attn_create", sent)]
    meta = [torch.empty(*s, dtype=torch.bfloat16, device="meta") for s in (Q, k_shape, v_shape)]
    e = _refused(lambda: torch.ops.mkernel.ring_attention(*meta, _key(made), False, 0.0))
    assert str(e) == says and e.__cause__ is None
    assert len(made.sizes) == 1


def test_attention_refuses_mismatched_k_v_as_before(made):
    # The one-GPU op (no plan) raises the same error at once.
    k_shape, v_shape, says, _ = RING_CASES["batch"]
    e = _refused(lambda: mkernel.attention(_empty(*Q), _empty(*k_shape), _empty(*v_shape)))
    assert str(e) == says.replace("ring_attention", "attention") and e.__cause__ is None
    assert made.sizes == []


def test_a_mismatch_pickles_as_itself():
    # (an error sent to another process: a worker pool's, all_gather_object's)
    import pickle
    from mkernel._tp_meta import mismatch
    err = pickle.loads(pickle.dumps(mismatch("mkernel.gemm_rs: a is [4, 64] but b is [8, 128]", "k")))
    assert err.dim == "k" and str(err) == "mkernel.gemm_rs: a is [4, 64] but b is [8, 128]"
