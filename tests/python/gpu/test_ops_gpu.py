"""GPU tests of the torch ops (device machine): results against torch in fp32,
out= variants, input validation, torch.compile, CUDA-graph capture/replay.
Skips (visibly) without torch or a GPU."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU here", allow_module_level=True)

import mkernel  # noqa: E402


def ref(a, b):
    return a.float() @ b.float().t()


def rel(x, y):
    return ((x.float() - y).norm() / y.norm()).item()


@pytest.mark.parametrize("m,n,k", [(1, 64, 64), (129, 320, 256), (1000, 576, 4096), (300, 256, 16384)])
def test_gemm_matches_torch(m, n, k):
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.rand(m, k, device="cuda", generator=g).sub_(0.5).bfloat16()
    b = torch.rand(n, k, device="cuda", generator=g).sub_(0.5).bfloat16()
    out = mkernel.gemm(a, b)
    assert out.shape == (m, n) and out.dtype == torch.bfloat16
    assert torch.isfinite(out).all()
    assert rel(out, ref(a, b)) < 1e-2


def test_gemm_out_into_a_strided_row_major_view_leaves_the_rest_alone():
    a = torch.randn(200, 128, device="cuda").bfloat16()
    b = torch.randn(192, 128, device="cuda").bfloat16()
    big = torch.full((200, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    view = big[:, :192]  # row stride 256
    assert mkernel.gemm(a, b, out=view) is view
    assert rel(view, ref(a, b)) < 1e-2
    assert torch.isnan(big[:, 192:]).all()


def test_gemm_runs_on_the_current_stream():
    """Queued on a side stream behind a GPU sleep, the op waits there: a read on the default stream (which does
    not wait for torch's side streams: they are non-blocking) still finds out unwritten. On the default stream,
    or after a host synchronisation, the op would have written it by then."""
    a = torch.randn(512, 512, device="cuda").bfloat16()
    b = torch.randn(512, 512, device="cuda").bfloat16()
    out = torch.full((512, 512), float("nan"), device="cuda", dtype=torch.bfloat16)
    mkernel.gemm(a, b)  # (a first call's setup, and the read's kernels below, loaded before the sleep: under
    assert torch.isnan(out).all().item()  # CUDA_MODULE_LOADING=LAZY a first load may synchronise the context)
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(1_000_000_000)  # GPU clock cycles: ~0.5 s
        assert mkernel.gemm(a, b, out=out) is out
    unwritten = torch.isnan(out).all().item()  # (the default stream)
    s.synchronize()
    assert unwritten, "the op did not wait behind the sleep on the current stream"
    assert rel(out, ref(a, b)) < 1e-2


@pytest.mark.parametrize("bad,pattern", [
    (lambda a, b: (a.half(), b), "must be bfloat16"),
    (lambda a, b: (a.t(), b), "unit column stride|contiguous"),
    (lambda a, b: (a, b[:, :64]), r"b must be \[n, 128\]"),
    (lambda a, b: (a.cpu(), b), "CUDA device"),
    (lambda a, b: (a, b[:100]), "n must be a positive multiple of 64"),
])
def test_gemm_bad_input_raises_mkernel_error(bad, pattern):
    a = torch.randn(128, 128, device="cuda").bfloat16()
    b = torch.randn(128, 128, device="cuda").bfloat16()
    x, y = bad(a, b)
    with pytest.raises(mkernel.MkernelError, match=pattern):
        mkernel.gemm(x, y)


def test_torch_compile_traces_the_op():
    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Parameter(torch.randn(512, 256, device="cuda").bfloat16() * 0.05)
            self.w2 = torch.nn.Parameter(torch.randn(256, 512, device="cuda").bfloat16() * 0.05)

        def forward(self, x):
            return mkernel.gemm(torch.relu(mkernel.gemm(x, self.w1)), self.w2)

    mod = Mlp()
    x = torch.randn(384, 256, device="cuda").bfloat16()
    want = mod(x)
    got = torch.compile(mod, fullgraph=True)(x)
    assert rel(got, want.float()) < 1e-2


def test_cuda_graph_capture_and_replay_with_new_inputs():
    a = torch.randn(256, 512, device="cuda").bfloat16()
    b = torch.randn(320, 512, device="cuda").bfloat16()
    out = torch.empty(256, 320, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mkernel.gemm(a, b, out=out)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.gemm(a, b, out=out)
    for i in range(3):
        a.copy_(torch.randn_like(a.float()).bfloat16())
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert rel(out, ref(a, b)) < 1e-2, f"replay {i}"


def test_a_captured_gemm_splits_its_short_last_wave_and_gives_the_eager_bits(workspace_spy):
    """Inside a CUDA-graph capture the op hands the library a workspace from the graph's pool, so the short last
    wave's tiles are split as in an eager call (not computed whole, in another fp32 order): the same bits."""
    import mkernel.ops
    m, n, k = 1024, 14336, 8192
    need = mkernel.gemm_workspace_bytes(m, n, k)
    if need == 0:
        pytest.skip("this GPU's SM count leaves no short last wave at this shape")
    assert need >= 128 * 256 * 4
    seen = workspace_spy(mkernel.ops)
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(n, k, device="cuda").bfloat16()
    eager = mkernel.gemm(a, b)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mkernel.gemm(a, b, out=out)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.gemm(a, b, out=out)
    assert seen == [need], f"the captured call's workspace: {seen} bytes, {need} needed"
    for _ in range(2):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager), "graph replay differs from the eager call"
    assert rel(out, ref(a, b)) < 1e-2


def test_autograd_matches_torch():
    a = torch.randn(128, 256, device="cuda").bfloat16().requires_grad_()
    b = torch.randn(192, 256, device="cuda").bfloat16().requires_grad_()
    a2 = a.detach().clone().requires_grad_()
    b2 = b.detach().clone().requires_grad_()
    mkernel.gemm(a, b).float().pow(2).sum().backward()
    (a2 @ b2.t()).float().pow(2).sum().backward()
    assert rel(a.grad, a2.grad.float()) < 2e-2
    assert rel(b.grad, b2.grad.float()) < 2e-2
    with pytest.raises(mkernel.MkernelError, match="autograd"):
        mkernel.gemm(a, b, out=torch.empty(128, 192, device="cuda", dtype=torch.bfloat16))


def test_gemm_rejects_non_tensors():
    b = torch.randn(128, 128, device="cuda").bfloat16()
    with pytest.raises(mkernel.MkernelError, match="must be a torch.Tensor"):
        mkernel.gemm([[1.0]], b)
    with pytest.raises(mkernel.MkernelError, match="must be a torch.Tensor"):
        mkernel.gemm(b, b, out=3)


def test_gemm_out_with_overlapping_rows_or_sharing_bytes_with_an_input_is_refused():
    a = torch.randn(512, 256, device="cuda").bfloat16()
    b = torch.randn(256, 256, device="cuda").bfloat16()
    row = torch.empty(1, 256, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(mkernel.MkernelError, match="rows must not overlap"):  # row stride 0: 512 rows into one
        mkernel.gemm(a, b, out=row.expand(512, 256))
    with pytest.raises(mkernel.MkernelError, match="out overlaps a"):  # n == k: out=a would read written rows
        mkernel.gemm(a, b, out=a)


def test_gemm_takes_a_one_row_view_whatever_its_row_stride():
    # Batch-1 decode: the last token's hidden state, [1, k] with the sequence's row stride.
    hidden = torch.randn(7, 256, device="cuda").bfloat16()
    b = torch.randn(128, 256, device="cuda").bfloat16()
    h = hidden[-1:, :]
    assert h.stride(0) == 256 and mkernel.gemm(h, b).shape == (1, 128)
    h2 = torch.randn(3, 2, 256, device="cuda").bfloat16()[:, -1, :][:1]  # row stride 512
    assert rel(mkernel.gemm(h2, b), ref(h2, b)) < 1e-2
    out = torch.empty(2, 128, device="cuda", dtype=torch.bfloat16)[:1].expand(1, 128)
    assert rel(mkernel.gemm(h2, b, out=out), ref(h2, b)) < 1e-2


def test_gemm_out_tells_autograd_that_out_changed():
    w = torch.randn(128, 128, device="cuda").bfloat16().requires_grad_()
    x = torch.randn(128, 128, device="cuda").bfloat16()
    y = (x @ w).sum()  # saves x for w's gradient
    v = x._version
    mkernel.gemm(torch.randn(128, 128, device="cuda").bfloat16(), torch.randn(128, 128, device="cuda").bfloat16(),
                 out=x)
    assert x._version > v
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_gemm_out_that_requires_grad_is_refused_while_autograd_records():
    # Writing it through the library would bypass autograd (torch's own out= ops refuse it too).
    a = torch.randn(128, 128, device="cuda").bfloat16()
    out = torch.zeros(128, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(mkernel.MkernelError, match="requires grad"):
        mkernel.gemm(a, a, out=out)
    assert out.abs().sum().item() == 0, "refused before anything ran"
    with torch.no_grad():
        mkernel.gemm(a, a, out=out)
    assert rel(out.detach(), ref(a, a)) < 1e-2


def test_gemm_out_refuses_autograd_under_torch_compile_too():
    a = torch.randn(128, 128, device="cuda").bfloat16().requires_grad_()
    b = torch.randn(128, 128, device="cuda").bfloat16()
    out = torch.empty(128, 128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(Exception, match="out= does not support autograd"):
        torch.compile(lambda a, b: mkernel.gemm(a, b, out=out), fullgraph=True)(a, b)


def test_traced_real_tensors_record_the_op_and_run_it():
    # make_fx on real tensors (a TorchDispatchMode): the call goes through torch.ops.mkernel.gemm, so the graph
    # records it, and the graph's replay gives the eager bits. vmap: torch's per-sample fallback runs the op.
    from torch.fx.experimental.proxy_tensor import make_fx
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.rand(3, 256, 512, device="cuda", generator=g).sub_(0.5).bfloat16()
    b = torch.rand(320, 512, device="cuda", generator=g).sub_(0.5).bfloat16()
    eager = mkernel.gemm(a[0], b)
    gm = make_fx(lambda x, w: mkernel.gemm(x, w))(a[0], b)
    assert "mkernel.gemm" in gm.code, gm.code
    assert torch.equal(gm(a[0], b), eager)
    batched = torch.vmap(lambda x: mkernel.gemm(x, b))(a)
    for i in range(3):
        assert torch.equal(batched[i], mkernel.gemm(a[i], b))


def test_forward_ad_is_refused_on_real_tensors():
    import torch.autograd.forward_ad as fwAD
    a = torch.randn(128, 128, device="cuda").bfloat16()
    b = torch.randn(128, 128, device="cuda").bfloat16()
    with fwAD.dual_level():
        with pytest.raises(mkernel.MkernelError, match="forward-mode AD"):
            mkernel.gemm(fwAD.make_dual(a, torch.randn_like(a)), b)
    with pytest.raises(mkernel.MkernelError, match="forward-mode AD"):
        torch.func.jvp(lambda x: mkernel.gemm(x, b), (a,), (torch.randn_like(a),))
