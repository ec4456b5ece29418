"""The tensor-parallel ops from Python on 2 GPUs (device machine):

    PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so \\
        torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py

mkernel.ag_gemm / gemm_rs / all_gather / reduce_scatter (cached plans, out=
variants, poisoned outputs) and the explicit plans against torch references
in fp32 (gathered and reduced with torch.distributed on the CPU); bad input
raising MkernelError on every rank before any collective starts; the
autograd gradients of the four ops against the same losses differentiated by
hand on the gathered tensors in fp32; torch.compile(fullgraph=True) of
ag_gemm -> gelu -> gemm_rs, forward and backward, against eager, and of
the out= variants under no_grad; one
CUDA-graph capture of all four ops and of that block's forward, replayed
with new inputs. Exits non-zero on any mismatch."""
import re

import torch
import torch.distributed as dist

import mkernel
import mkernel.torchrun
import mkernel.tp


def expect(ok, what):
    if not ok:
        raise AssertionError(what)


def close(x, ref, what, tol=1e-2):
    """x (any device/dtype) against an fp32 CPU reference; NaN fails."""
    err = ((x.detach().float().cpu() - ref).norm() / ref.norm()).item()
    expect(err < tol, f"{what}: relative error {err:.3e} (tolerance {tol})")


def expect_error(fn, pattern, what):
    try:
        fn()
    except mkernel.MkernelError as e:
        expect(re.search(pattern, str(e)) is not None, f"{what}: message {str(e)!r} lacks {pattern!r}")
        return
    raise AssertionError(f"{what}: no MkernelError")


class Dist:
    """Random data per rank and CPU references through torch.distributed (gloo)."""

    def __init__(self, rank, world):
        self.rank, self.world = rank, world
        self.g = torch.Generator(device="cuda").manual_seed(100 + rank)

    def rnd(self, *shape, dtype=torch.bfloat16):
        return (torch.rand(*shape, device="cuda", generator=self.g) - 0.5).to(dtype)

    def cat(self, t):
        """concat over ranks (rank order) of t, on the CPU in fp32."""
        parts = [torch.empty(t.shape, dtype=torch.float32) for _ in range(self.world)]
        dist.all_gather(parts, t.detach().float().cpu().contiguous())
        return torch.cat(parts)

    def sum(self, t):
        """sum over ranks of t, on the CPU in fp32."""
        total = t.detach().float().cpu().contiguous()
        dist.all_reduce(total)
        return total

    def rows(self, t):
        r = t.shape[0] // self.world
        return t[self.rank * r:(self.rank + 1) * r]


def check_forward(comm, d):
    nan = float("nan")
    # AllGather + GEMM: allgather(x) @ w^T (m_local need not be a multiple of 128).
    m_local, n, k = 384, 320, 512
    x, w = d.rnd(m_local, k), d.rnd(n, k)
    X = d.cat(x)
    ref = X @ w.float().cpu().t()
    close(mkernel.ag_gemm(x, w, comm), ref, "ag_gemm")
    out, gathered = mkernel.ag_gemm(x, w, comm, return_gathered=True)
    close(out, ref, "ag_gemm (return_gathered)")
    expect(torch.equal(gathered.float().cpu(), X), "ag_gemm gathered")
    out = torch.full((d.world * m_local, n), nan, device="cuda", dtype=torch.bfloat16)
    expect(mkernel.ag_gemm(x, w, comm, out=out) is out, "ag_gemm out= returns out")
    close(out, ref, "ag_gemm out=")
    out.fill_(nan)
    out2, gathered = mkernel.ag_gemm(x, w, comm, out=out, return_gathered=True)
    expect(out2 is out and torch.equal(gathered.float().cpu(), X), "ag_gemm out= gathered")
    close(out, ref, "ag_gemm out= (return_gathered)")

    # GEMM + ReduceScatter: this rank's rows of sum_ranks h @ v^T.
    m, n2, k2 = 512, 256, 384
    h, v = d.rnd(m, k2), d.rnd(n2, k2)
    ref = d.rows(d.sum(h.float() @ v.float().t()))
    close(mkernel.gemm_rs(h, v, comm), ref, "gemm_rs")
    y = torch.full((m // d.world, n2), nan, device="cuda", dtype=torch.bfloat16)
    expect(mkernel.gemm_rs(h, v, comm, out=y) is y, "gemm_rs out= returns out")
    close(y, ref, "gemm_rs out=")

    # The collectives alone (their own cached plans).
    expect(torch.equal(mkernel.all_gather(x, comm).float().cpu(), X), "all_gather")
    g = torch.full((d.world * m_local, k), nan, device="cuda", dtype=torch.bfloat16)
    expect(mkernel.all_gather(x, comm, out=g) is g and torch.equal(g.float().cpu(), X), "all_gather out=")
    xs = d.rnd(m, n2)
    ref = d.rows(d.sum(xs))
    close(mkernel.reduce_scatter(xs, comm), ref, "reduce_scatter")
    y.fill_(nan)
    expect(mkernel.reduce_scatter(xs, comm, out=y) is y, "reduce_scatter out= returns out")
    close(y, ref, "reduce_scatter out=")

    # Explicit plans.
    ag = mkernel.AgGemm(comm, m_local, n, k)
    expect(torch.equal(ag.all_gather(x).float().cpu(), X), "AgGemm.all_gather")
    rs = mkernel.GemmRs(comm, m, n2, k2)
    close(rs.reduce_scatter(xs), ref, "GemmRs.reduce_scatter")
    torch.cuda.synchronize()
    dist.barrier()
    for p in (ag, rs):
        p.close()


def check_errors(comm, d):
    # Every rank fails alike before any collective: the all_gather at the end
    # would time out if one of these had started a plan on one side only.
    x, w = d.rnd(256, 512), d.rnd(320, 512)
    h, v = d.rnd(512, 384), d.rnd(256, 384)
    expect_error(lambda: mkernel.ag_gemm(x.float(), w, comm), "bfloat16", "float input")
    expect_error(lambda: mkernel.ag_gemm(x.cpu(), w, comm), "CUDA device", "CPU input")
    expect_error(lambda: mkernel.ag_gemm(x[:, :256], w, comm), "a_local must be contiguous", "strided input")
    expect_error(lambda: mkernel.ag_gemm(x, w[:, :256].contiguous(), comm), r"b must be \[n, 512\]", "k mismatch")
    expect_error(lambda: mkernel.ag_gemm(x, w[:100].contiguous(), comm), "multiple of 64", "n not a multiple of 64")
    expect_error(lambda: mkernel.ag_gemm(x, w, comm, out=torch.empty_like(x)), "must be a contiguous",
                 "ag_gemm out of the wrong shape")
    expect_error(lambda: mkernel.gemm_rs(h[:384], v, comm), "row blocks of a multiple of 128", "gemm_rs rows")
    expect_error(lambda: mkernel.reduce_scatter(d.rnd(512, 100), comm), "multiple of 64", "reduce_scatter n")
    expect_error(lambda: mkernel.all_gather(d.rnd(256, 96), comm), "multiple of 64", "all_gather k")
    expect_error(lambda: mkernel.gemm_rs(h.requires_grad_(), v, comm, out=torch.empty(256, 256, device="cuda",
                                                                                     dtype=torch.bfloat16)),
                 "autograd", "out= with autograd")
    expect_error(lambda: mkernel.all_gather(x, object()), "not a mkernel.Communicator", "not a communicator")
    expect(mkernel.tp.register(comm) == comm._uid, "register returns the communicator's key")
    expect(torch.equal(mkernel.all_gather(x, comm).float().cpu(), d.cat(x)), "all_gather after the errors")


def check_autograd(comm, d):
    m_local, n, k = 256, 320, 512  # ag_gemm: the gradient of a_local needs m_local % 128 == 0
    x0, w0 = d.rnd(m_local, k), d.rnd(n, k)
    X = d.cat(x0)
    M = X.shape[0]
    wo, wg = d.rnd(M, n, dtype=torch.float32), d.rnd(M, k, dtype=torch.float32)  # loss weights, per rank
    # L = sum_r <out_r, wo_r> (+ sum_r <G, wg_r> when G is used): dL/dx_r = rows r of
    # sum_s (wo_s w_s + wg_s), dL/dw_r = wo_r^T X.
    want_x = d.rows(d.sum(wo.cpu() @ w0.float().cpu()))
    want_xg = want_x + d.rows(d.sum(wg.cpu()))
    want_w = wo.cpu().t() @ X
    for case in ("both", "a only", "b only", "with gathered", "op without gathered"):
        x = x0.clone().requires_grad_(case != "b only")
        w = w0.clone().requires_grad_(case != "a only")
        if case == "with gathered":
            out, gathered = mkernel.ag_gemm(x, w, comm, return_gathered=True)
            loss = (out.float() * wo).sum() + (gathered.float() * wg).sum()
        elif case == "op without gathered":  # b's gradient all-gathers a_local again
            out = torch.ops.mkernel.ag_gemm(x, w, comm._uid)
            loss = (out.float() * wo).sum()
        else:
            out = mkernel.ag_gemm(x, w, comm)
            loss = (out.float() * wo).sum()
        loss.backward()
        if x.requires_grad:
            close(x.grad, want_xg if case == "with gathered" else want_x, f"ag_gemm grad a_local ({case})", 2e-2)
        if w.requires_grad:
            close(w.grad, want_w, f"ag_gemm grad b ({case})", 2e-2)

    m, n2, k2 = 512, 256, 384  # gemm_rs
    h0, v0 = d.rnd(m, k2), d.rnd(n2, k2)
    wy = d.rnd(m // d.world, n2, dtype=torch.float32)
    # L = sum_r <out_r, wy_r>: with Gy = concat_r(wy_r), dL/dh_r = Gy v_r, dL/dv_r = Gy^T h_r.
    Gy = d.cat(wy)
    want_h, want_v = Gy @ v0.float().cpu(), Gy.t() @ h0.float().cpu()
    for case in ("both", "a only", "b only"):
        h = h0.clone().requires_grad_(case != "b only")
        v = v0.clone().requires_grad_(case != "a only")
        (mkernel.gemm_rs(h, v, comm).float() * wy).sum().backward()
        if h.requires_grad:
            close(h.grad, want_h, f"gemm_rs grad a ({case})", 2e-2)
        if v.requires_grad:
            close(v.grad, want_v, f"gemm_rs grad b ({case})", 2e-2)

    # The collectives: all_gather's gradient is a reduce-scatter and back.
    x = x0.clone().requires_grad_()
    (mkernel.all_gather(x, comm).float() * wg).sum().backward()
    close(x.grad, d.rows(d.sum(wg.cpu())), "all_gather grad", 2e-2)
    xs = d.rnd(m, n2).requires_grad_()
    (mkernel.reduce_scatter(xs, comm).float() * wy).sum().backward()
    close(xs.grad, Gy, "reduce_scatter grad", 2e-2)


class TpMlp(torch.nn.Module):
    """ag_gemm (column-parallel up projection) -> gelu -> gemm_rs (row-parallel down)."""

    def __init__(self, comm, w1, w2):
        super().__init__()
        self.comm = comm
        self.w1, self.w2 = torch.nn.Parameter(w1), torch.nn.Parameter(w2)

    def forward(self, x):
        h = mkernel.ag_gemm(x, self.w1, self.comm)
        return mkernel.gemm_rs(torch.nn.functional.gelu(h), self.w2, self.comm)


def check_compile(comm, d):
    m_local, hidden, ffn_r = 256, 512, 512
    mod = TpMlp(comm, d.rnd(ffn_r, hidden) * 0.1, d.rnd(hidden, ffn_r) * 0.1)
    x0 = d.rnd(m_local, hidden)
    wy = d.rnd(m_local, hidden, dtype=torch.float32)

    def step(fn):
        x = x0.clone().requires_grad_()
        mod.zero_grad(set_to_none=True)
        y = fn(x)
        (y.float() * wy).sum().backward()
        return y.detach(), x.grad, mod.w1.grad, mod.w2.grad

    want = step(mod)
    compiled = torch.compile(mod, fullgraph=True)
    for i in range(2):  # the second call runs the cached graphs
        got = step(compiled)
        for name, a, b in zip(("out", "grad x", "grad w1", "grad w2"), got, want):
            close(a, b.float().cpu(), f"compiled {name} (call {i})", 2e-2)


def check_compile_out(comm, d):
    """torch.compile(fullgraph=True) of the out= variants (mutating custom ops), under no_grad,
    with fresh inputs and poisoned outputs per call."""
    m_local, n, k, m, n2, k2 = 256, 320, 512, 512, 256, 384
    x, w, h, v, xs = d.rnd(m_local, k), d.rnd(n, k), d.rnd(m, k2), d.rnd(n2, k2), d.rnd(m, n2)
    bf = dict(device="cuda", dtype=torch.bfloat16)
    o_ag, o_ag2, o_rs = (torch.empty(d.world * m_local, n, **bf), torch.empty(d.world * m_local, n, **bf),
                         torch.empty(m // d.world, n2, **bf))
    o_g, o_r = torch.empty(d.world * m_local, k, **bf), torch.empty(m // d.world, n2, **bf)

    def f(x, w, h, v, xs):
        mkernel.ag_gemm(x, w, comm, out=o_ag)
        mkernel.gemm_rs(h, v, comm, out=o_rs)
        mkernel.all_gather(x, comm, out=o_g)
        mkernel.reduce_scatter(xs, comm, out=o_r)
        _, gathered = mkernel.ag_gemm(x, w, comm, out=o_ag2, return_gathered=True)
        return gathered * 2  # computed from an op's output inside the graph

    compiled = torch.compile(f, fullgraph=True)
    with torch.no_grad():
        for i in range(3):  # later calls run the cached graph
            for t in (x, h, xs):
                t.copy_(d.rnd(*t.shape))
            for t in (o_ag, o_ag2, o_rs, o_g, o_r):
                t.fill_(float("nan"))
            g2 = compiled(x, w, h, v, xs)
            torch.cuda.synchronize()
            X = d.cat(x)
            ref = X @ w.float().cpu().t()
            close(o_ag, ref, f"compiled ag_gemm out= (call {i})")
            close(o_ag2, ref, f"compiled ag_gemm out= return_gathered (call {i})")
            expect(torch.equal(g2.float().cpu(), 2 * X) and torch.equal(o_g.float().cpu(), X),
                   f"compiled gathered / all_gather out= (call {i})")
            close(o_rs, d.rows(d.sum(h.float() @ v.float().t())), f"compiled gemm_rs out= (call {i})")
            close(o_r, d.rows(d.sum(xs)), f"compiled reduce_scatter out= (call {i})")


def check_cuda_graph(comm, d):
    m_local, n, k, m, n2, k2 = 384, 320, 512, 512, 256, 384
    x, w, h, v, xs = d.rnd(m_local, k), d.rnd(n, k), d.rnd(m, k2), d.rnd(n2, k2), d.rnd(m, n2)
    w1, w2, x2 = d.rnd(256, 512) * 0.1, d.rnd(512, 256) * 0.1, d.rnd(256, 512)
    bf = dict(device="cuda", dtype=torch.bfloat16)
    o_ag, o_rs = torch.empty(d.world * m_local, n, **bf), torch.empty(m // d.world, n2, **bf)
    o_g, o_r = torch.empty(d.world * m_local, k, **bf), torch.empty(m // d.world, n2, **bf)

    def forward():
        mkernel.ag_gemm(x, w, comm, out=o_ag)
        mkernel.gemm_rs(h, v, comm, out=o_rs)
        mkernel.all_gather(x, comm, out=o_g)
        mkernel.reduce_scatter(xs, comm, out=o_r)
        out, gathered = mkernel.ag_gemm(x, w, comm, return_gathered=True)  # allocating, in the graph's pool
        mlp = mkernel.gemm_rs(torch.nn.functional.gelu(mkernel.ag_gemm(x2, w1, comm)), w2, comm)
        return out, gathered, mlp

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        forward()  # warm-up: makes the plans outside the capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, gathered, mlp = forward()
    for i in range(3):
        for t in (x, h, xs, x2):
            t.copy_(d.rnd(*t.shape))
        for t in (o_ag, o_rs, o_g, o_r, out, gathered, mlp):
            t.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        X = d.cat(x)
        ref = X @ w.float().cpu().t()
        close(o_ag, ref, f"graph ag_gemm (replay {i})")
        close(out, ref, f"graph ag_gemm allocating (replay {i})")
        expect(torch.equal(gathered.float().cpu(), X) and torch.equal(o_g.float().cpu(), X),
               f"graph gathered / all_gather (replay {i})")
        close(o_rs, d.rows(d.sum(h.float() @ v.float().t())), f"graph gemm_rs (replay {i})")
        close(o_r, d.rows(d.sum(xs)), f"graph reduce_scatter (replay {i})")
        hid = torch.nn.functional.gelu((d.cat(x2).cuda() @ w1.float().t()).bfloat16()).float()
        close(mlp, d.rows(d.sum(hid @ w2.float().t())), f"graph TP MLP block (replay {i})", 2e-2)


def run(comm, rank, world):
    d = Dist(rank, world)
    check_forward(comm, d)
    check_errors(comm, d)
    check_autograd(comm, d)
    check_compile(comm, d)
    check_compile_out(comm, d)
    check_cuda_graph(comm, d)
    torch.cuda.synchronize()
    dist.barrier()
    print(f"rank {rank}: tensor-parallel ops OK (forward, errors, autograd, torch.compile incl. out=, CUDA graph)",
          flush=True)


if __name__ == "__main__":
    mkernel.torchrun.main(run)
