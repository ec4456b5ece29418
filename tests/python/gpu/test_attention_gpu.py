"""GPU tests of the one-GPU attention engine (mkernel.attention) against torch
scaled_dot_product_attention in fp32 (math backend): causal and not, head_dim
64 and 128, grouped-query heads, sequence lengths that are not multiples of
the 128-token tiles, seq_kv != seq_q, poisoned outputs, repeated calls with
fresh data, CUDA-graph replay, torch.compile, input validation.
Skips (visibly) without torch or a GPU."""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU here", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import mkernel  # noqa: E402
import mkernel._attention  # noqa: E402  (the fast path's shape cache, checked below)


def reference(q, k, v, causal, scale=None):
    """fp32 out and lse; causal bottom-right aligned (as FlashAttention)."""
    b, sq, h, d = q.shape
    skv, hkv = k.shape[1], k.shape[2]
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(h // hkv, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(h // hkv, dim=1)
    scale = scale or 1.0 / math.sqrt(d)
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(sq, device=q.device)[:, None] + (skv - sq)
        j = torch.arange(skv, device=q.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    out = torch.softmax(s, dim=-1).nan_to_num(0.0) @ vf
    if not causal:  # the library's own contract is checked against SDPA's math backend too
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            sd = F.scaled_dot_product_attention(qf, kf, vf, scale=scale)
        assert (sd - out).abs().max().item() < 1e-4
    return out.transpose(1, 2), lse


def rand(shape, g):
    return torch.randn(shape, device="cuda", generator=g).bfloat16()


def check(q, k, v, causal, out, lse, scale=None):
    ro, rl = reference(q, k, v, causal, scale)
    assert torch.isfinite(out.float()).all(), "unwritten (poisoned) or non-finite outputs"
    err = ((out.float() - ro).norm() / ro.norm()).item()
    assert err < 1e-2, f"relative error of out {err:.3e}"
    finite = torch.isfinite(rl)
    assert torch.equal(finite, torch.isfinite(lse)), "lse is -inf exactly where no key is visible"
    lerr = ((lse[finite] - rl[finite]).abs() / rl[finite].abs().clamp_min(1.0)).max().item()
    assert lerr < 1e-3, f"relative error of lse {lerr:.3e}"


CASES = [  # batch, seq_q, seq_kv, heads, kv_heads, head_dim
    (1, 128, 128, 1, 1, 128), (2, 1000, 1000, 4, 4, 128), (1, 777, 1290, 8, 2, 128), (3, 256, 256, 4, 1, 64),
    (1, 1500, 700, 2, 2, 64), (1, 2048, 2048, 32, 8, 128), (2, 300, 3000, 6, 3, 128), (1, 1, 517, 2, 1, 64),
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,sq,skv,h,hkv,d", CASES)
def test_attention_matches_sdpa_fp32(b, sq, skv, h, hkv, d, causal):
    g = torch.Generator(device="cuda").manual_seed(b * 7 + sq + skv * 3 + h + d + causal)
    q, k, v = rand((b, sq, h, d), g), rand((b, skv, hkv, d), g), rand((b, skv, hkv, d), g)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((b, h, sq), float("nan"), device="cuda")
    o2, l2 = mkernel.attention(q, k, v, causal=causal, out=out, lse=lse)
    assert o2 is out and l2 is lse
    check(q, k, v, causal, out, lse)


@pytest.mark.parametrize("units", ["static", "claimed"])
@pytest.mark.parametrize("group", [0, 1, 3, 1000])  # the rule, head-major, groups (a smaller last one), tile-major
@pytest.mark.parametrize("b,sq,skv,h,hkv,d,causal", [(2, 1000, 1000, 4, 4, 128, True), (1, 777, 1290, 8, 2, 128, True),
                                                     (3, 256, 256, 4, 1, 64, False), (1, 2048, 2048, 32, 8, 128, True)])
def test_every_unit_distribution_matches_sdpa(monkeypatch, units, group, b, sq, skv, h, hkv, d, causal):
    """MK_ATTN_UNITS / MK_ATTN_GROUP_HEADS (read per call) only change which CTA computes which tile."""
    monkeypatch.setenv("MK_ATTN_UNITS", units)
    monkeypatch.setenv("MK_ATTN_GROUP_HEADS", str(group))
    g = torch.Generator(device="cuda").manual_seed(b + sq + h + group + (units == "claimed"))
    q, k, v = rand((b, sq, h, d), g), rand((b, skv, hkv, d), g), rand((b, skv, hkv, d), g)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((b, h, sq), float("nan"), device="cuda")
    mkernel.attention(q, k, v, causal=causal, out=out, lse=lse)
    check(q, k, v, causal, out, lse)


def test_claimed_units_on_two_streams_at_once(monkeypatch):
    """Each call claims from its own counter (stream-ordered scratch): two calls queued at once on two streams,
    each behind a GPU sleep (each call's grid fills the SMs, so the kernels overlap at most at their ends; the
    counters must be distinct blocks, each zeroed), both complete and correct, three times."""
    monkeypatch.setenv("MK_ATTN_UNITS", "claimed")
    g = torch.Generator(device="cuda").manual_seed(23)
    shape, kvs = (2, 1024, 8, 128), (2, 1024, 2, 128)
    ins = [(rand(shape, g), rand(kvs, g), rand(kvs, g)) for _ in range(2)]
    outs = [(torch.full(shape, float("nan"), device="cuda", dtype=torch.bfloat16),
             torch.full((2, 8, 1024), float("nan"), device="cuda")) for _ in range(2)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    # (the kernels loaded before the sleeps: under CUDA_MODULE_LOADING=LAZY a first load may synchronise the context)
    (q, k, v), (o, lse) = ins[0], outs[0]
    mkernel.attention(q, k, v, causal=True, out=o, lse=lse)
    o.fill_(float("nan"))
    lse.fill_(float("nan"))
    assert torch.isnan(o).all().item()
    torch.cuda.synchronize()
    for rep in range(3):
        for (q, k, v), (o, lse), st in zip(ins, outs, streams):
            with torch.cuda.stream(st):
                torch.cuda._sleep(1_000_000_000 if rep == 0 else 200_000)  # (cycles: ~0.5 s, then ~0.1 ms)
                mkernel.attention(q, k, v, causal=True, out=o, lse=lse)
        if rep == 0:  # each call waits on its own stream: the default stream (not waiting for them) sees no output
            assert all(torch.isnan(o).all().item() for o, _ in outs), "a call did not go to its current stream"
        torch.cuda.synchronize()
        for (q, k, v), (o, lse) in zip(ins, outs):
            check(q, k, v, True, o, lse)
            o.fill_(float("nan"))
            lse.fill_(float("nan"))
        torch.cuda.synchronize()  # the fills (current stream) before the next calls (the side streams)


def test_bad_unit_knobs_are_refused(monkeypatch):
    q = torch.zeros((1, 128, 2, 128), device="cuda", dtype=torch.bfloat16)
    monkeypatch.setenv("MK_ATTN_UNITS", "dynamic")
    with pytest.raises(RuntimeError, match="MK_ATTN_UNITS"):
        mkernel.attention(q, q, q, causal=True)
    monkeypatch.setenv("MK_ATTN_UNITS", "auto")
    monkeypatch.setenv("MK_ATTN_GROUP_HEADS", "-1")
    with pytest.raises(RuntimeError, match="MK_ATTN_GROUP_HEADS"):
        mkernel.attention(q, q, q, causal=True)


def test_attention_scale_and_large_logits():
    g = torch.Generator(device="cuda").manual_seed(5)
    q, k, v = rand((1, 512, 2, 128), g) * 8, rand((1, 512, 2, 128), g) * 8, rand((1, 512, 2, 128), g)
    out, lse = mkernel.attention(q, k, v, causal=True, scale=0.3)
    check(q, k, v, True, out, lse, scale=0.3)


def test_repeated_calls_with_fresh_data_and_graph_replay():
    g = torch.Generator(device="cuda").manual_seed(11)
    shape = (2, 1024, 8, 128)
    q, k, v = rand(shape, g), rand((2, 1024, 2, 128), g), rand((2, 1024, 2, 128), g)
    for i in range(5):
        q.copy_(rand(shape, g))
        out, lse = mkernel.attention(q, k, v, causal=bool(i % 2))
        check(q, k, v, bool(i % 2), out, lse)
    out = torch.empty_like(q)
    lse = torch.empty((2, 8, 1024), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mkernel.attention(q, k, v, causal=True, out=out, lse=lse)  # warm-up (tensor maps, attributes)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.attention(q, k, v, causal=True, out=out, lse=lse)
    for _ in range(3):
        q.copy_(rand(shape, g))
        k.copy_(rand(k.shape, g))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check(q, k, v, True, out, lse)


def test_a_captured_causal_call_claims_its_units_and_gives_the_eager_bits(monkeypatch, workspace_spy):
    """Inside a CUDA-graph capture the op hands the library a workspace from the graph's pool for its unit
    counter (the library's own pool cannot serve a capture), so captured causal calls claim their units as eager
    ones do; the bits are the eager call's (a unit's sums do not depend on which CTA takes it)."""
    if getattr(mkernel._attention.lib, "mk_attention_workspace_bytes", None) is None:
        pytest.skip("library without mk_attention_workspace_bytes")
    monkeypatch.delenv("MK_ATTN_UNITS", raising=False)  # the default: causal calls claim
    seen = workspace_spy(mkernel._attention)
    g = torch.Generator(device="cuda").manual_seed(12)
    q, k, v = rand((2, 2048, 8, 128), g), rand((2, 2048, 2, 128), g), rand((2, 2048, 2, 128), g)
    eager_out, eager_lse = mkernel.attention(q, k, v, causal=True)
    out, lse = torch.empty_like(q), torch.empty((2, 8, 2048), device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mkernel.attention(q, k, v, causal=True, out=out, lse=lse)  # warm-up
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.attention(q, k, v, causal=True, out=out, lse=lse)
    assert seen and seen[-1] >= 8, f"the captured call got no workspace ({seen})"
    for _ in range(2):
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager_out) and torch.equal(lse, eager_lse), "graph replay differs from eager"
    seen.clear()  # torch.compile's CUDA graphs (mode="reduce-overhead") take the same path
    f = torch.compile(lambda q, k, v: mkernel.attention(q, k, v, causal=True), mode="reduce-overhead")
    for _ in range(3):
        co, cl = f(q, k, v)
        torch.cuda.synchronize()
        assert torch.equal(co, eager_out) and torch.equal(cl, eager_lse), "compiled graph differs from eager"
    assert seen and seen[-1] >= 8, f"the compiled graph's call got no workspace ({seen})"


def test_torch_compile_traces_the_op():
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = rand((1, 384, 4, 64), g), rand((1, 384, 4, 64), g), rand((1, 384, 4, 64), g)

    def f(q, k, v):
        o, _ = mkernel.attention(q, k, v, causal=True)
        return o * 2

    out = torch.compile(f, fullgraph=True)(q, k, v)
    ro, _ = reference(q, k, v, True)
    assert ((out.float() / 2 - ro).norm() / ro.norm()).item() < 1e-2


@pytest.mark.parametrize("bad,msg", [
    (lambda q, k, v: (q.float(), k, v), "bfloat16"),
    (lambda q, k, v: (q, k[:, :, :3].contiguous(), v[:, :, :3].contiguous()), "must divide"),
    (lambda q, k, v: (q[..., :32].contiguous(), k[..., :32].contiguous(), v[..., :32].contiguous()), "64 or 128"),
    (lambda q, k, v: (q.transpose(1, 2), k, v), "contiguous"),
    (lambda q, k, v: (q, k, v[:, :100]), "differ"),
    (lambda q, k, v: (q, k[:, :0].contiguous(), v[:, :0].contiguous()), ">= 1"),
])
def test_bad_inputs_raise_clear_errors(bad, msg):
    q = torch.zeros(1, 128, 4, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.zeros(1, 128, 4, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(mkernel.MkernelError, match=msg):
        mkernel.attention(*bad(q, k, k.clone()))


def test_bad_inputs_after_steady_state_calls():
    """Repeated shapes take a fast path; anything unusual falls back to the full checks."""
    q = torch.randn(1, 128, 4, 64, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    out, lse = mkernel.attention(q, k, v)
    o2, l2 = mkernel.attention(q, k, v, out=torch.full_like(out, float("nan")), lse=torch.full_like(lse, float("nan")))
    assert torch.equal(o2, out) and torch.equal(l2, lse)
    assert (q.shape, k.shape, v.shape) in mkernel._attention._SEEN  # the fast path is what is being tested
    with pytest.raises(mkernel.MkernelError, match="bfloat16"):
        mkernel.attention(q.float(), k, v)
    with pytest.raises(mkernel.MkernelError, match="contiguous"):
        mkernel.attention(q.transpose(1, 2).contiguous().transpose(1, 2), k, v)  # q's shape, other strides
    with pytest.raises(mkernel.MkernelError, match="contiguous"):
        mkernel.attention(torch.randn(1, 128, 4, 128, device="cuda", dtype=torch.bfloat16)[..., :64], k, v)  # padded
    with pytest.raises(mkernel.MkernelError, match="CUDA device"):
        mkernel.attention(q.cpu(), k, v)
    with pytest.raises(mkernel.MkernelError, match="out must be"):
        mkernel.attention(q, k, v, out=out.float())
    with pytest.raises(mkernel.MkernelError, match="lse must be"):
        mkernel.attention(q, k, v, out=out, lse=lse[:, :, :64])


def test_forward_only_op_refuses_inputs_that_need_a_gradient():
    """No backward exists: an input requiring grad while autograd records is refused (eager, fast path and
    full path alike), instead of an output that silently carries no gradient; under no_grad it runs."""
    q = torch.randn(1, 128, 4, 64, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    mkernel.attention(q, k, v)  # the shape is now on the fast path
    qg = q.clone().requires_grad_()
    with pytest.raises(mkernel.MkernelError, match="forward only"):
        mkernel.attention(qg, k, v)
    with torch.no_grad():
        out, _ = mkernel.attention(qg, k, v)
    assert torch.equal(out, mkernel.attention(q, k, v)[0])


def test_out_or_lse_that_requires_grad_is_refused_while_autograd_records():
    g = torch.Generator(device="cuda").manual_seed(13)
    q, k, v = rand((1, 256, 2, 128), g), rand((1, 256, 2, 128), g), rand((1, 256, 2, 128), g)
    mkernel.attention(q, k, v)  # this shape takes the fast path next: it must refuse too
    for grad_out in (True, False):
        out = torch.zeros_like(q).requires_grad_(grad_out)
        lse = torch.zeros((1, 2, 256), device="cuda").requires_grad_(not grad_out)
        with pytest.raises(mkernel.MkernelError, match="requires grad"):
            mkernel.attention(q, k, v, out=out, lse=lse)
        assert out.abs().sum().item() == 0 and lse.abs().sum().item() == 0, "refused before anything ran"
    with torch.no_grad():
        mkernel.attention(q, k, v, out=out, lse=lse)
    check(q, k, v, False, out.detach(), lse.detach())


def test_out_and_lse_tell_autograd_that_they_changed():
    q = torch.randn(1, 128, 4, 64, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    out, lse = mkernel.attention(q, k, v)
    vo, vl = out._version, lse._version
    mkernel.attention(q, k, v, out=out, lse=lse)  # the fast path
    assert out._version > vo and lse._version > vl
