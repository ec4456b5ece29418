"""The tensor-parallel ops from Python on 2 GPUs (device machine):

    PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so \\
        torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py

mkernel.ag_gemm / gemm_rs / all_gather / reduce_scatter / gemm_ar / all_reduce
(cached plans, out= variants, poisoned outputs) and the explicit plans against
torch references in fp32 (gathered and reduced with torch.distributed on the
CPU); gemm_ar and all_reduce on every element within bf16 rounding of the
fp32 sum, bit-identical on every rank, in a shape of each GEMM+AR path (one-shot
and two-shot); bad input raising MkernelError on every rank before any
collective starts; the autograd gradients of the six ops against the same
losses differentiated by hand on the gathered tensors in fp32;
torch.compile(fullgraph=True) of ag_gemm -> gelu -> gemm_rs (and -> gemm_ar),
forward and backward, against eager, and of the out= variants under no_grad;
one CUDA-graph capture of all six ops and of those blocks' forward, replayed
with new inputs; plans made by hand closed with their communicator, and out=
telling autograd that out changed. Exits non-zero on any mismatch.

Across nodes (e.g. MK_RANKS_PER_NODE=1) the check runs on a side stream, as
README's Network section tells users of a proxy that calls CUDA (fabric with
staging, EFA's signal adds) to: a copy of a running op's result into pageable
memory on the legacy default stream (`.cpu()` without synchronize) blocks such
a proxy (bench/results/emu-pageable-20261201.md). On emulated nodes
(MK_RANKS_PER_NODE: the emu NIC) every part runs: emu's writes are made by a
CTA of each op's own kernel (src/net/emu), so first-call kernel loads of
cuBLAS and Triton while an op waits on the network block nothing (until
2026-12-03 they blocked emu's proxy and these parts were skipped there)."""
import os
import re
import sys
import time
import warnings

import torch
import torch.distributed as dist

import mkernel
import mkernel.torchrun
import mkernel.tp


def expect(ok, what):
    if not ok:
        raise AssertionError(what)


def close(x, ref, what, tol=1e-2, scale=None):
    """x (any device/dtype) against an fp32 CPU reference; NaN fails. Without scale, the relative
    error of the whole; with scale (fp32 CPU, ref's shape: the sum of the summands' magnitudes, which
    bounds what bf16 rounding of the partial sums and of the result can move an element), every
    element: |x - ref| <= tol * scale (plus a floor of 1e-3 of that at the mean scale, for the fp32
    accumulation's own differences where the summands nearly cancel)."""
    x = x.detach().float().cpu()
    if scale is None:
        err = ((x - ref).norm() / ref.norm()).item()
        expect(err < tol, f"{what}: relative error {err:.3e} (tolerance {tol})")
        return
    bound = tol * (scale + 1e-3 * scale.mean())
    bad = ~((x - ref).abs() <= bound)  # NaN is bad
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.numel()} elements off; first {list(i)}: "
                             f"{x[i].item()} against {ref[i].item()} (bound {bound[i].item():.3e})")


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

    def same_on_every_rank(self, t, what):
        """t's bytes are the same on every rank (gathered and compared; collective)."""
        mine = t.detach().contiguous().view(torch.uint8).cpu()
        parts = [torch.empty_like(mine) for _ in range(self.world)]
        dist.all_gather(parts, mine)
        differ = [r for r, p in enumerate(parts) if not torch.equal(p, parts[0])]
        expect(not differ, f"{what}: the output of rank(s) {differ} differs from rank 0's")


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

    # GEMM + AllReduce: the whole sum_ranks h @ v^T on every rank, the same bits everywhere. On 2
    # ranks of one node, m x n = 512 x 256 takes the one-shot path (m * n <= 512 * 8192:
    # src/ops/ag_gemm/tp_plan.hpp, ar_one_shot_fits), 2048 x 4096 the two-shot one.
    bf = dict(device="cuda", dtype=torch.bfloat16)
    for ha, va in ((h, v), (d.rnd(2048, 512), d.rnd(4096, 512))):
        part = ha.float() @ va.float().t()
        ref, scale = d.sum(part), d.sum(part.abs())
        tag = f"gemm_ar {ha.shape[0]}x{va.shape[0]}x{ha.shape[1]}"
        out = mkernel.gemm_ar(ha, va, comm)
        expect(tuple(out.shape) == tuple(ref.shape) and out.dtype == torch.bfloat16, f"{tag}: shape / dtype")
        close(out, ref, tag, scale=scale)
        d.same_on_every_rank(out, tag)
        out = torch.full(ref.shape, nan, **bf)
        expect(mkernel.gemm_ar(ha, va, comm, out=out) is out, f"{tag} out= returns out")
        close(out, ref, f"{tag} out=", scale=scale)
        d.same_on_every_rank(out, f"{tag} out=")

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
    # An out= that requires grad while autograd records is refused on every rank, before anything runs (the
    # library would write it behind autograd's back); the fast path (these shapes ran) refuses it too.
    yg = torch.zeros_like(y).requires_grad_()
    expect_error(lambda: mkernel.reduce_scatter(xs, comm, out=yg), "requires grad", "reduce_scatter out= with grad")
    expect(yg.abs().sum().item() == 0, "reduce_scatter out= with grad: written")
    # A misaligned view (a bf16 element past a 16-byte boundary) is refused on every rank before the plan
    # for its shape is made (the library would refuse it at launch, on one rank, after the others went ahead).
    rows = d.world * 8  # a shape no plan exists for yet
    flat = d.rnd(1, rows * 128 + 8).reshape(-1)
    expect_error(lambda: mkernel.reduce_scatter(flat[1:1 + rows * 128].view(rows, 128), comm), "16-byte aligned",
                 "reduce_scatter of a misaligned view")
    # The all-reduce alone (against dist.all_reduce in fp32), also in place (include/mkernel/tp.hpp allows it).
    for xa in (xs, d.rnd(2048, 4096)):
        ref_a, scale_a = d.sum(xa), d.sum(xa.abs())
        tag = f"all_reduce {xa.shape[0]}x{xa.shape[1]}"
        out = mkernel.all_reduce(xa, comm)
        expect(tuple(out.shape) == tuple(xa.shape), f"{tag}: shape")
        close(out, ref_a, tag, scale=scale_a)
        d.same_on_every_rank(out, tag)
        out.fill_(nan)
        expect(mkernel.all_reduce(xa, comm, out=out) is out, f"{tag} out= returns out")
        close(out, ref_a, f"{tag} out=", scale=scale_a)
        d.same_on_every_rank(out, f"{tag} out=")
        xi = xa.clone()
        expect(mkernel.all_reduce(xi, comm, out=xi) is xi, f"{tag} in place returns out")
        close(xi, ref_a, f"{tag} in place", scale=scale_a)
        d.same_on_every_rank(xi, f"{tag} in place")

    # Explicit plans.
    ag = mkernel.AgGemm(comm, m_local, n, k)
    expect(torch.equal(ag.all_gather(x).float().cpu(), X), "AgGemm.all_gather")
    rs = mkernel.GemmRs(comm, m, n2, k2)
    close(rs.reduce_scatter(xs), ref, "GemmRs.reduce_scatter")
    ar = mkernel.GemmAr(comm, m, n2, k2)
    part = h.float() @ v.float().t()
    close(ar.run(h, v), d.sum(part), "GemmAr.run", scale=d.sum(part.abs()))
    close(ar.all_reduce(xs), d.sum(xs), "GemmAr.all_reduce", scale=d.sum(xs.abs()))
    torch.cuda.synchronize()
    dist.barrier()
    for p in (ag, rs, ar):
        p.close()


def check_plan_cache(comm, d):
    """A plan per distinct shape: one warning once tp.PLAN_WARN_COUNT are cached; close_plans frees them all
    (their memory and signal words), after which the ops make the plans they need again."""
    from mkernel import tp
    tp.close_plans(comm)
    held = comm.symmetric_bytes()  # the signal region, and no plan's
    n, k = 64, 64
    v = d.rnd(n, k)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(tp.PLAN_WARN_COUNT + 3):
            h = d.rnd(d.world * (i + 1), k)
            y = mkernel.gemm_rs(h, v, comm)
            if i % 16 == 0 or i == tp.PLAN_WARN_COUNT + 2:
                close(y, d.rows(d.sum(h.float() @ v.float().t())), f"gemm_rs, shape {i}")
    said = [str(w.message) for w in caught if "op plans are cached" in str(w.message)]
    expect(len(said) == 1, f"the plan-cache warning was given {len(said)} times, not once: {said}")
    if d.world > 1:  # (one rank's plans run the standalone GEMM and hold no staging)
        expect(comm.symmetric_bytes() > held, "the cached plans hold no symmetric memory")
    tp.close_plans(comm)
    expect(not any(key[1] == comm._uid for key in tp._PLANS), "close_plans left plans of this communicator")
    expect(comm.symmetric_bytes() == held,
           f"close_plans left {comm.symmetric_bytes() - held} bytes of the plans' symmetric memory")
    h = d.rnd(d.world * 3, k)
    close(mkernel.gemm_rs(h, v, comm), d.rows(d.sum(h.float() @ v.float().t())), "gemm_rs after close_plans")
    tp.close_plans(comm)
    # A bounded cache: no warning past PLAN_WARN_COUNT plans (the bound is the user's choice); with
    # MK_PLAN_CACHE_MAX = 3 never more than 3 plans of this communicator, the oldest closed first, every call
    # still right (the steady-state entries of closed plans are gone), and a shape whose plan was closed makes
    # it again.
    os.environ["MK_PLAN_CACHE_MAX"] = str(tp.PLAN_WARN_COUNT + 8)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(tp.PLAN_WARN_COUNT + 3):
                h = d.rnd(d.world * (i + 1), k)
                y = mkernel.gemm_rs(h, v, comm)
                if i % 32 == 0:
                    close(y, d.rows(d.sum(h.float() @ v.float().t())), f"bounded cache of {tp.PLAN_WARN_COUNT + 8}")
        expect(not any("op plans are cached" in str(w.message) for w in caught), "a warning with a bounded cache")
        tp.close_plans(comm)
        os.environ["MK_PLAN_CACHE_MAX"] = "3"
        for i in range(8):
            h = d.rnd(d.world * (i + 1), k)
            close(mkernel.gemm_rs(h, v, comm), d.rows(d.sum(h.float() @ v.float().t())), f"bounded cache, shape {i}")
            mine = [key for key in tp._PLANS if key[1] == comm._uid]
            expect(len(mine) == min(i + 1, 3), f"MK_PLAN_CACHE_MAX=3 but {len(mine)} plans cached after shape {i}")
        before = [key for key in tp._PLANS if key[1] == comm._uid]
        h = d.rnd(d.world, k)  # shape 0 again: its plan was closed; made again, the oldest one closed
        close(mkernel.gemm_rs(h, v, comm), d.rows(d.sum(h.float() @ v.float().t())), "bounded cache, shape 0 again")
        after = [key for key in tp._PLANS if key[1] == comm._uid]
        expect(len(after) == 3 and after[:2] == before[1:] and after[2] not in before,
               f"the bounded cache did not close its oldest plan: {before} -> {after}")
        # A capture that needs a plan the bound closed says so (not "call the op once before capturing").
        h1 = d.rnd(d.world * 2, k)  # shape 1: made above, closed by the bound since
        torch.cuda.synchronize()
        g1 = torch.cuda.CUDAGraph()
        try:
            with warnings.catch_warnings():  # (the failed capture ends with nothing in it, as meant: torch warns)
                warnings.filterwarnings("ignore", "The CUDA Graph is empty")
                with torch.cuda.graph(g1):
                    mkernel.gemm_rs(h1, v, comm)
        except mkernel.MkernelError as e:
            expect("closed by the cache bound" in str(e), f"capture after the bound closed the plan: {e}")
        else:
            raise AssertionError("a capture made a plan, or found one the bound had closed")
        check_plan_cache_captured(comm, d, v)
    finally:
        del os.environ["MK_PLAN_CACHE_MAX"]
    tp.close_plans(comm)
    expect(comm.symmetric_bytes() == held, "close_plans after the bounded cache left symmetric memory")


def check_plan_cache_captured(comm, d, v):
    """The bound never closes a plan a live CUDA graph holds: the graph replays right while other shapes'
    plans come and go; when such plans alone exceed the bound a warning says so once; close_plans closes
    them too, and says so. Once the graph is gone, close_plans says nothing, and the bound closes the plan."""
    from mkernel import tp
    n, k = v.shape
    tp.close_plans(comm)
    os.environ["MK_PLAN_CACHE_MAX"] = "2"
    hc = d.rnd(d.world * 5, k)
    oc = torch.empty(5, n, device=hc.device, dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mkernel.gemm_rs(hc, v, comm, out=oc)  # makes the plan outside the capture
    torch.cuda.current_stream().wait_stream(s)
    cap = [tp._PLANS[key] for key in tp._PLANS if key[1] == comm._uid]
    expect(len(cap) == 1 and not cap[0].captured, "a plan never captured says it was")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.gemm_rs(hc, v, comm, out=oc)
    expect(cap[0].captured, "the gemm_rs plan captured in a CUDA graph does not say so")

    def another_shape(rows, what):  # a new shape's call, checked; the captured plan stays, one other beside it
        h = d.rnd(d.world * rows, k)
        close(mkernel.gemm_rs(h, v, comm), d.rows(d.sum(h.float() @ v.float().t())), what)
        mine = [tp._PLANS[key] for key in tp._PLANS if key[1] == comm._uid]
        expect(len(mine) == 2 and mine[0] is cap[0], f"{what}: {len(mine)} plans cached, the captured one "
               f"{'kept' if cap[0] in mine else 'closed'}")

    for i in range(4):
        another_shape(i + 1, f"MK_PLAN_CACHE_MAX=2 beside a captured plan, shape {i}")
    for i in range(2):
        hc.copy_(d.rnd(*hc.shape))
        oc.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        close(oc, d.rows(d.sum(hc.float() @ v.float().t())), f"graph replay beside a bounded cache ({i})")
    os.environ["MK_PLAN_CACHE_MAX"] = "1"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(2):
            another_shape(i + 7, f"MK_PLAN_CACHE_MAX=1 beside a captured plan, shape {i}")
    said = [str(w.message) for w in caught if "held by CUDA graphs" in str(w.message)]
    expect(len(said) == 1, f"the captured-plans-exceed-the-bound warning was given {len(said)} times: {said}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tp.close_plans(comm)
    said = [str(w.message) for w in caught if "were captured in CUDA graphs" in str(w.message)]
    expect(len(said) == 1 and "closed 1 op plan" in said[0], f"close_plans of a captured plan said {said}")
    del graph
    # A captured plan whose graph is gone (torch destroys it with the object) closes without the warning.
    with torch.cuda.stream(s):
        mkernel.gemm_rs(hc, v, comm, out=oc)  # (close_plans closed its plan: made again outside the capture)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.gemm_rs(hc, v, comm, out=oc)
    cap = [tp._PLANS[key] for key in tp._PLANS if key[1] == comm._uid]
    expect(len(cap) == 1 and cap[0].captured and cap[0].graphs_alive, "the plan captured again does not say so")
    del graph
    torch.cuda.synchronize()
    end = time.monotonic() + 5
    while cap[0].graphs_alive and time.monotonic() < end:
        time.sleep(0.001)
    expect(cap[0].captured and not cap[0].graphs_alive, "graphs_alive 5 s after the plan's only graph was deleted")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tp.close_plans(comm)
    said = [str(w.message) for w in caught if "were captured in CUDA graphs" in str(w.message)]
    expect(not said, f"close_plans of a plan whose graph is gone warned: {said}")
    # The bound (still 1) closes a captured plan once no rank's graph holds it (the ranks agree in one exchange).
    with torch.cuda.stream(s):
        mkernel.gemm_rs(hc, v, comm, out=oc)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.gemm_rs(hc, v, comm, out=oc)
    old = [tp._PLANS[key] for key in tp._PLANS if key[1] == comm._uid]
    del graph
    torch.cuda.synchronize()
    end = time.monotonic() + 5
    while old[0].graphs_alive and time.monotonic() < end:
        time.sleep(0.001)
    expect(len(old) == 1 and old[0].captured and not old[0].graphs_alive, "the plan captured a third time")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        h = d.rnd(d.world * 3, k)
        close(mkernel.gemm_rs(h, v, comm), d.rows(d.sum(h.float() @ v.float().t())), "beside a released plan")
    mine = [tp._PLANS[key] for key in tp._PLANS if key[1] == comm._uid]
    expect(len(mine) == 1 and mine[0] is not old[0] and not old[0]._h,
           "the bound kept a captured plan whose graph was gone on every rank")
    said = [str(w.message) for w in caught if "held by CUDA graphs" in str(w.message)]
    expect(not said, f"the bound warned of a plan whose graph was gone: {said}")
    # A graph that rank 0 alone still holds keeps its plan on every rank (the ranks OR their flags), with the
    # warning on every rank; once rank 0 deletes it too, the bound closes the plan.
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.gemm_rs(h, v, comm)
    held = [tp._PLANS[key] for key in tp._PLANS if key[1] == comm._uid]
    if d.rank != 0:
        del graph
        torch.cuda.synchronize()
        end = time.monotonic() + 5
        while held and held[0].graphs_alive and time.monotonic() < end:
            time.sleep(0.001)
    expect(len(held) == 1 and held[0].graphs_alive == (d.rank == 0), "graphs_alive with rank 0's graph alone")
    for i, rows in enumerate((7, 9)):
        if i == 1 and d.rank == 0:
            del graph
            torch.cuda.synchronize()
            end = time.monotonic() + 5
            while held[0].graphs_alive and time.monotonic() < end:
                time.sleep(0.001)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            h2 = d.rnd(d.world * rows, k)
            close(mkernel.gemm_rs(h2, v, comm), d.rows(d.sum(h2.float() @ v.float().t())), f"beside rank 0's graph {i}")
        said = [str(w.message) for w in caught if "held by CUDA graphs" in str(w.message)]
        if i == 0:
            expect(held[0]._h and len(said) == 1, f"a plan rank 0's graph holds: kept {bool(held[0]._h)}, said {said}")
        else:
            expect(not held[0]._h and not said, f"a plan no rank's graph holds: kept {bool(held[0]._h)}, said {said}")


def check_errors(comm, d):
    # Every rank fails alike, in Python or in the plan's collective check: the all_gather at the end would time
    # out if one of these had started a plan on one side only.
    x, w = d.rnd(256, 512), d.rnd(320, 512)
    h, v = d.rnd(512, 384), d.rnd(256, 384)
    expect_error(lambda: mkernel.ag_gemm(x.float(), w, comm), "bfloat16", "float input")
    expect_error(lambda: mkernel.ag_gemm(x.cpu(), w, comm), "CUDA device", "CPU input")
    expect_error(lambda: mkernel.ag_gemm(x[:, :256], w, comm), "a_local must be contiguous", "strided input")
    expect_error(lambda: mkernel.ag_gemm(x, w[:, :256].contiguous(), comm), r"b must be \[n, 512\]", "k mismatch")
    expect_error(lambda: mkernel.ag_gemm(x, w[:100].contiguous(), comm), "multiple of 64", "n not a multiple of 64")
    expect_error(lambda: mkernel.ag_gemm(x, w, comm, out=torch.empty_like(x)), "must be a contiguous",
                 "ag_gemm out of the wrong shape")
    expect_error(lambda: mkernel.gemm_rs(h[:385], v, comm), "equal row blocks", "gemm_rs rows")
    expect_error(lambda: mkernel.reduce_scatter(d.rnd(512, 100), comm), "multiple of 64", "reduce_scatter n")
    expect_error(lambda: mkernel.all_gather(d.rnd(256, 96), comm), "multiple of 64", "all_gather k")
    expect_error(lambda: mkernel.gemm_ar(h[:385], v, comm), "equal row blocks", "gemm_ar rows")
    expect_error(lambda: mkernel.gemm_ar(h, v[:, :256].contiguous(), comm), r"b must be \[n, 384\]",
                 "gemm_ar k mismatch")
    expect_error(lambda: mkernel.all_reduce(d.rnd(512, 100), comm), "multiple of 64", "all_reduce n")
    expect_error(lambda: mkernel.all_reduce(d.rnd(385, 128), comm), "equal row blocks",
                 "all_reduce rows")
    # out is the whole [m, n]: gemm_rs's / reduce_scatter's m / world rows are refused.
    expect_error(lambda: mkernel.gemm_ar(h, v, comm, out=torch.empty(256, 256, device="cuda", dtype=torch.bfloat16)),
                 "must be a contiguous", "gemm_ar out of gemm_rs's shape")
    expect_error(lambda: mkernel.all_reduce(d.rnd(512, 256), comm, out=torch.empty(256, 256, device="cuda",
                                                                                   dtype=torch.bfloat16)),
                 "must be a contiguous", "all_reduce out of reduce_scatter's shape")
    expect_error(lambda: mkernel.gemm_rs(h.requires_grad_(), v, comm, out=torch.empty(256, 256, device="cuda",
                                                                                     dtype=torch.bfloat16)),
                 "autograd", "out= with autograd")
    expect_error(lambda: mkernel.gemm_ar(h.requires_grad_(), v, comm, out=torch.empty(512, 256, device="cuda",
                                                                                     dtype=torch.bfloat16)),
                 "autograd", "gemm_ar out= with autograd")
    expect_error(lambda: mkernel.all_reduce(d.rnd(512, 256).requires_grad_(), comm,
                                            out=torch.empty(512, 256, device="cuda", dtype=torch.bfloat16)),
                 "autograd", "all_reduce out= with autograd")
    expect_error(lambda: mkernel.all_gather(x, object()), "not a mkernel.Communicator", "not a communicator")
    # A size bad on one rank only (an uneven split left rank 1 no rows): the plan's check, collective, fails every
    # rank at once naming rank 1 (session 48; refused in Python on rank 1 alone, it left the others waiting in the
    # plan check for the bootstrap bound, 60 s).
    rows = 0 if d.rank == 1 else 256
    t0 = time.monotonic()
    expect_error(lambda: mkernel.ag_gemm(d.rnd(256, 512)[:rows].contiguous(), w, comm), "rank 1",
                 "a_local with no rows on rank 1 alone")
    expect(time.monotonic() - t0 < 10, f"a bad size on rank 1 alone took {time.monotonic() - t0:.1f} s to fail")
    if d.world > 1:
        # b's columns against a's wrong on rank 1 alone, on a shape's first call: rank 1 takes part in the plan
        # check with k -1 (session 56), so the other ranks fail at once naming rank 1 instead of waiting for it until
        # the bootstrap bound (60 s), and rank 1 says what it refused.
        hb, wb = d.rnd(256, 320), d.rnd(192, 384 if d.rank == 1 else 320)
        t0 = time.monotonic()
        expect_error(lambda: mkernel.gemm_rs(hb, wb, comm), r"b must be \[n, 320\]" if d.rank == 1 else "rank 1",
                     "b against a on rank 1 alone, first call")
        expect(time.monotonic() - t0 < 10, f"b against a on rank 1 alone took {time.monotonic() - t0:.1f} s to fail")
    expect(mkernel.tp.register(comm) == comm._uid, "register returns the communicator's key")
    expect(torch.equal(mkernel.all_gather(x, comm).float().cpu(), d.cat(x)), "all_gather after the errors")
    # Repeated shapes take a fast path (mkernel/tp.py _hot): the same errors after steady-state calls.
    hs, vs = d.rnd(512, 384), d.rnd(256, 384)
    o_rs = torch.empty(512 // comm.world, 256, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):
        mkernel.gemm_rs(hs, vs, comm, out=o_rs)
        mkernel.all_gather(x, comm)
    expect(("gemm_rs", comm._uid, hs.shape, vs.shape) in mkernel.tp._HOT
           and ("all_gather", comm._uid, x.shape, None) in mkernel.tp._HOT, "the fast path has entries to test")
    expect_error(lambda: mkernel.all_gather(x.float(), comm), "bfloat16", "float input, steady state")
    expect_error(lambda: mkernel.all_gather(x.t().contiguous().t(), comm), "contiguous", "strided input, steady state")
    padded = d.rnd(x.shape[0], 2 * x.shape[1])[:, :x.shape[1]]  # x's shape, unit column stride, padded rows
    expect_error(lambda: mkernel.all_gather(padded, comm), "contiguous", "padded rows, steady state")
    expect_error(lambda: mkernel.all_gather(x.cpu(), comm), "CUDA device", "CPU input, steady state")
    expect_error(lambda: mkernel.gemm_rs(hs, vs, comm, out=o_rs.float()), "bfloat16", "float out, steady state")
    expect_error(lambda: mkernel.gemm_rs(hs, vs, comm, out=o_rs[:-1]), "must be a contiguous",
                 "out of the wrong shape, steady state")
    expect_error(lambda: mkernel.gemm_rs(hs.detach().requires_grad_(), vs, comm, out=o_rs), "autograd",
                 "out= with autograd, steady state")
    expect(torch.equal(mkernel.all_gather(x, comm).float().cpu(), d.cat(x)), "all_gather after the steady-state errors")


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

    m, n2, k2 = 512, 256, 384  # gemm_rs, gemm_ar
    h0, v0 = d.rnd(m, k2), d.rnd(n2, k2)
    wy, wa = d.rnd(m // d.world, n2, dtype=torch.float32), d.rnd(m, n2, dtype=torch.float32)
    # L = sum_r <out_r, w_r>, Y = sum_r h_r v_r^T. gemm_rs: out_r = rows r of Y, so dL/dY = Gy =
    # concat_r(wy_r); gemm_ar: out_r = Y on every rank, so dL/dY = Ga = sum_r wa_r (each rank's
    # loss counts: tp_ar.py). Either way dL/dh_r = G v_r, dL/dv_r = G^T h_r.
    Gy, Ga = d.cat(wy), d.sum(wa)
    for op, wo, G in ((mkernel.gemm_rs, wy, Gy), (mkernel.gemm_ar, wa, Ga)):
        want_h, want_v = G @ v0.float().cpu(), G.t() @ h0.float().cpu()
        for case in ("both", "a only", "b only"):
            h = h0.clone().requires_grad_(case != "b only")
            v = v0.clone().requires_grad_(case != "a only")
            (op(h, v, comm).float() * wo).sum().backward()
            if h.requires_grad:
                close(h.grad, want_h, f"{op.__name__} grad a ({case})", 2e-2)
            if v.requires_grad:
                close(v.grad, want_v, f"{op.__name__} grad b ({case})", 2e-2)

    # The collectives: all_gather's gradient is a reduce-scatter and back.
    x = x0.clone().requires_grad_()
    (mkernel.all_gather(x, comm).float() * wg).sum().backward()
    close(x.grad, d.rows(d.sum(wg.cpu())), "all_gather grad", 2e-2)
    xs = d.rnd(m, n2).requires_grad_()
    (mkernel.reduce_scatter(xs, comm).float() * wy).sum().backward()
    close(xs.grad, Gy, "reduce_scatter grad", 2e-2)
    xs = d.rnd(m, n2).requires_grad_()  # all_reduce's gradient is an all-reduce: sum_r wa_r
    (mkernel.all_reduce(xs, comm).float() * wa).sum().backward()
    close(xs.grad, Ga, "all_reduce grad", 2e-2)


class TpMlp(torch.nn.Module):
    """ag_gemm (column-parallel up projection) -> gelu -> gemm_rs (row-parallel down; or gemm_ar,
    the whole output on every rank)."""

    def __init__(self, comm, w1, w2, down=mkernel.gemm_rs):
        super().__init__()
        self.comm, self.down = comm, down
        self.w1, self.w2 = torch.nn.Parameter(w1), torch.nn.Parameter(w2)

    def forward(self, x):
        h = mkernel.ag_gemm(x, self.w1, self.comm)
        return self.down(torch.nn.functional.gelu(h), self.w2, self.comm)


def check_compile(comm, d):
    m_local, hidden, ffn_r = 256, 512, 512
    w1, w2, x0 = d.rnd(ffn_r, hidden) * 0.1, d.rnd(hidden, ffn_r) * 0.1, d.rnd(m_local, hidden)
    for down, rows in ((mkernel.gemm_rs, m_local), (mkernel.gemm_ar, d.world * m_local)):
        mod = TpMlp(comm, w1.clone(), w2.clone(), down)
        wy = d.rnd(rows, hidden, dtype=torch.float32)

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
                close(a, b.float().cpu(), f"compiled {down.__name__} block {name} (call {i})", 2e-2)


def check_compile_out(comm, d):
    """torch.compile(fullgraph=True) of the out= variants (mutating custom ops), under no_grad,
    with fresh inputs and poisoned outputs per call."""
    m_local, n, k, m, n2, k2 = 256, 320, 512, 512, 256, 384
    x, w, h, v, xs = d.rnd(m_local, k), d.rnd(n, k), d.rnd(m, k2), d.rnd(n2, k2), d.rnd(m, n2)
    bf = dict(device="cuda", dtype=torch.bfloat16)
    o_ag, o_ag2, o_rs = (torch.empty(d.world * m_local, n, **bf), torch.empty(d.world * m_local, n, **bf),
                         torch.empty(m // d.world, n2, **bf))
    o_g, o_r = torch.empty(d.world * m_local, k, **bf), torch.empty(m // d.world, n2, **bf)
    o_ar, o_a = torch.empty(m, n2, **bf), torch.empty(m, n2, **bf)

    def f(x, w, h, v, xs):
        mkernel.ag_gemm(x, w, comm, out=o_ag)
        mkernel.gemm_rs(h, v, comm, out=o_rs)
        mkernel.all_gather(x, comm, out=o_g)
        mkernel.reduce_scatter(xs, comm, out=o_r)
        mkernel.gemm_ar(h, v, comm, out=o_ar)
        mkernel.all_reduce(xs, comm, out=o_a)
        _, gathered = mkernel.ag_gemm(x, w, comm, out=o_ag2, return_gathered=True)
        return gathered * 2  # computed from an op's output inside the graph

    compiled = torch.compile(f, fullgraph=True)
    with torch.no_grad():
        for i in range(3):  # later calls run the cached graph
            for t in (x, h, xs):
                t.copy_(d.rnd(*t.shape))
            for t in (o_ag, o_ag2, o_rs, o_g, o_r, o_ar, o_a):
                t.fill_(float("nan"))
            g2 = compiled(x, w, h, v, xs)
            torch.cuda.synchronize()
            X = d.cat(x)
            ref = X @ w.float().cpu().t()
            close(o_ag, ref, f"compiled ag_gemm out= (call {i})")
            close(o_ag2, ref, f"compiled ag_gemm out= return_gathered (call {i})")
            expect(torch.equal(g2.float().cpu(), 2 * X) and torch.equal(o_g.float().cpu(), X),
                   f"compiled gathered / all_gather out= (call {i})")
            part = h.float() @ v.float().t()
            Y = d.sum(part)
            close(o_rs, d.rows(Y), f"compiled gemm_rs out= (call {i})")
            close(o_r, d.rows(d.sum(xs)), f"compiled reduce_scatter out= (call {i})")
            close(o_ar, Y, f"compiled gemm_ar out= (call {i})", scale=d.sum(part.abs()))
            close(o_a, d.sum(xs), f"compiled all_reduce out= (call {i})", scale=d.sum(xs.abs()))
            d.same_on_every_rank(o_ar, f"compiled gemm_ar out= (call {i})")
            d.same_on_every_rank(o_a, f"compiled all_reduce out= (call {i})")


def check_cuda_graph(comm, d):
    m_local, n, k, m, n2, k2 = 384, 320, 512, 512, 256, 384
    x, w, h, v, xs = d.rnd(m_local, k), d.rnd(n, k), d.rnd(m, k2), d.rnd(n2, k2), d.rnd(m, n2)
    w1, w2, x2 = d.rnd(256, 512) * 0.1, d.rnd(512, 256) * 0.1, d.rnd(256, 512)
    bf = dict(device="cuda", dtype=torch.bfloat16)
    o_ag, o_rs = torch.empty(d.world * m_local, n, **bf), torch.empty(m // d.world, n2, **bf)
    o_g, o_r = torch.empty(d.world * m_local, k, **bf), torch.empty(m // d.world, n2, **bf)
    o_ar, o_a = torch.empty(m, n2, **bf), torch.empty(m, n2, **bf)  # gemm_ar 512 x 256: one-shot on 2 ranks
    h3, v3 = d.rnd(2048, 256), d.rnd(4096, 256)  # gemm_ar 2048 x 4096: two-shot

    def forward():
        mkernel.ag_gemm(x, w, comm, out=o_ag)
        mkernel.gemm_rs(h, v, comm, out=o_rs)
        mkernel.all_gather(x, comm, out=o_g)
        mkernel.reduce_scatter(xs, comm, out=o_r)
        mkernel.gemm_ar(h, v, comm, out=o_ar)
        mkernel.all_reduce(xs, comm, out=o_a)
        out, gathered = mkernel.ag_gemm(x, w, comm, return_gathered=True)  # allocating, in the graph's pool
        ar2 = mkernel.gemm_ar(h3, v3, comm)
        hid = torch.nn.functional.gelu(mkernel.ag_gemm(x2, w1, comm))
        return out, gathered, ar2, mkernel.gemm_rs(hid, w2, comm), mkernel.gemm_ar(hid, w2, comm)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        forward()  # warm-up: makes the plans outside the capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, gathered, ar2, mlp, mlp_ar = forward()
    for i in range(3):
        for t in (x, h, xs, x2, h3):
            t.copy_(d.rnd(*t.shape))
        for t in (o_ag, o_rs, o_g, o_r, o_ar, o_a, out, gathered, ar2, mlp, mlp_ar):
            t.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        X = d.cat(x)
        ref = X @ w.float().cpu().t()
        close(o_ag, ref, f"graph ag_gemm (replay {i})")
        close(out, ref, f"graph ag_gemm allocating (replay {i})")
        expect(torch.equal(gathered.float().cpu(), X) and torch.equal(o_g.float().cpu(), X),
               f"graph gathered / all_gather (replay {i})")
        part = h.float() @ v.float().t()
        Y = d.sum(part)
        close(o_rs, d.rows(Y), f"graph gemm_rs (replay {i})")
        close(o_r, d.rows(d.sum(xs)), f"graph reduce_scatter (replay {i})")
        close(o_ar, Y, f"graph gemm_ar (replay {i})", scale=d.sum(part.abs()))
        close(o_a, d.sum(xs), f"graph all_reduce (replay {i})", scale=d.sum(xs.abs()))
        part = h3.float() @ v3.float().t()
        close(ar2, d.sum(part), f"graph gemm_ar two-shot allocating (replay {i})", scale=d.sum(part.abs()))
        for t, what in ((o_ar, "gemm_ar"), (o_a, "all_reduce"), (ar2, "gemm_ar two-shot"), (mlp_ar, "gemm_ar block")):
            d.same_on_every_rank(t, f"graph {what} (replay {i})")
        hid = torch.nn.functional.gelu((d.cat(x2).cuda() @ w1.float().t()).bfloat16()).float()
        Y = d.sum(hid @ w2.float().t())
        close(mlp, d.rows(Y), f"graph TP MLP block (replay {i})", 2e-2)
        close(mlp_ar, Y, f"graph TP MLP block, gemm_ar (replay {i})", 2e-2)


def check_plans_close_with_their_communicator(d):
    """Plans made by hand on a communicator are closed by its close() (a C++ plan refers to its communicator)
    and then refuse to run; the op calls tell autograd that out= changed. On a second communicator (collective)."""
    c2 = mkernel.init()
    p = mkernel.AgGemm(c2, 64, 128, 128)
    buf = c2.alloc_symmetric(4096)  # (freed by close(); its free() afterwards deletes only the handle)
    x, w = d.rnd(64, 128), d.rnd(128, 128)
    y = p.run(x, w)
    close(y, d.cat(x) @ w.float().cpu().t(), "explicit plan on a second communicator")
    v = y._version
    mkernel.ag_gemm(x, w, c2, out=y)  # the full path, then the fast path
    mkernel.ag_gemm(x, w, c2, out=y)
    expect(y._version >= v + 2, f"ag_gemm(out=) did not bump out's version ({v} -> {y._version})")
    torch.cuda.synchronize()
    c2.close()
    expect_error(lambda: p.run(x, w), "plan is closed", "an explicit plan after its communicator closed")
    buf.free()
    expect(buf._h is None, "a symmetric buffer's free() after its communicator closed kept its handle")
    expect_error(lambda: mkernel.ag_gemm(x, w, c2), "closed", "an op on a closed communicator")
    # init() whose rank 0 cannot make the unique id: every rank raises its error at once (before 2026-12-06 the
    # others waited in the id's broadcast for the process group's timeout; now in the store, for the id or this error).
    old = os.environ.get("MK_BOOTSTRAP_TIMEOUT_MS")
    if d.rank == 0:
        os.environ["MK_BOOTSTRAP_TIMEOUT_MS"] = "soon"
    try:
        t0 = time.monotonic()
        expect_error(lambda: mkernel.init(), "rank 0 could not make the unique id.*MK_BOOTSTRAP_TIMEOUT_MS",
                     "init with a bad knob on rank 0")
        expect(time.monotonic() - t0 < 30, "init's error took the process group's timeout to arrive")
    finally:
        if old is None:
            os.environ.pop("MK_BOOTSTRAP_TIMEOUT_MS", None)
        else:
            os.environ["MK_BOOTSTRAP_TIMEOUT_MS"] = old


def run(comm, rank, world):
    nodes = comm.info()["num_nodes"]
    if nodes > 1:
        with torch.cuda.stream(torch.cuda.Stream()):
            return run_checks(comm, rank, world, nodes)
    return run_checks(comm, rank, world, nodes)


def run_checks(comm, rank, world, nodes):
    d = Dist(rank, world)
    check_forward(comm, d)
    check_errors(comm, d)
    check_plan_cache(comm, d)
    check_autograd(comm, d)
    check_compile(comm, d)
    check_compile_out(comm, d)
    check_cuda_graph(comm, d)
    check_plans_close_with_their_communicator(d)
    torch.cuda.synchronize()
    dist.barrier()
    # One write with its newline: the ranks print at once, and print()'s separate write of the newline let two
    # ranks' lines run together in an unbuffered stdout (session 66's log).
    sys.stdout.write(f"rank {rank}: tensor-parallel ops OK on {nodes} node(s) (forward, errors, the plan cache, "
                     "autograd, torch.compile incl. out=, CUDA graph; gemm_ar / all_reduce one-shot and two-shot)\n")
    sys.stdout.flush()


if __name__ == "__main__":
    mkernel.torchrun.main(run)
