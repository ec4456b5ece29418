"""Baselines for sequence-parallel (ring) attention, interleaved call by call in one run (device machine,
one node):

    torchrun --standalone --nproc_per_node=2 bench/torch_ring_attn_bench.py [--quick] [--out DIR]

The sequence is split over the W ranks, S_local tokens each; every tensor is (B, S_local, heads, D):
q [B, S_local, 32, 128], k and v [B, S_local, Hkv, 128] (Hkv 32: MHA, 8: GQA), bf16; the output
[B, S_local, 32, 128] holds this rank's rows of the full sequence's attention. B in {1, 4}, S_local in
{2k, 4k, 8k, 16k, 32k} (--quick: B 1, S_local 8k), causal and non-causal. Causal inputs are zigzag shards
(mkernel/zigzag.py: rank r holds chunks r and 2W-1-r of 2W), so every rank does the same work.
  ring flash / ring cudnn (ring-flash-attention style): W-1 steps pass K and V to the next rank
    (dist.batch_isend_irecv issued from a side stream) while the current step's attention runs on the
    compute stream (torch.ops.aten._scaled_dot_product_flash_attention / _scaled_dot_product_cudnn_attention);
    each step's output and log-sum-exp merge into fp32 accumulators. Zigzag causal steps: own K/V causal;
    an earlier rank's K/V: all local queries x its first half; a later rank's: the second half of the
    local queries x all of it (both non-causal).
  allgather flash / allgather cudnn: dist.all_gather_into_tensor of K and V (one call per batch element),
    then attention: one call (non-causal), or per local chunk a causal call against its own K/V plus a
    non-causal call against every earlier chunk (one contiguous slice of the gathered K/V, see
    allgather_slots), merged by log-sum-exp.
  mkernel: mk_variants(): mkernel.ring_attention (one persistent kernel).
(The baselines' code: bench/ring_baselines.py; the fp32 reference and error measures: bench/attn_ref.py.)
GQA: each backend is probed once per Hkv with K/V of Hkv heads; if the aten op rejects them (or gets them
wrong), K and V are expanded to 32 heads with repeat_interleave before each call (communication stays at
Hkv heads). The report says which. Every variant is checked against an fp32 single-GPU reference of the
full sequence (S_local 1024, B 1) before timing; timing per the project's MEASURING.md (shared/), spelled
out in the report header. Rank 0 writes torch-ring-attn-<UTC stamp>.md under --out. NVLink multicast
stays off.
"""
import os

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import argparse, datetime, gc, sys  # noqa: E401,E402
from dataclasses import dataclass, field  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_timing import agree, fence, max_over_ranks, measure, provenance, sh, short  # noqa: E402,F401
from dist_timing import config_label, num_hosts, paired_ratio  # noqa: E402
from dist_timing import mk_environment, use_in_tree_package  # noqa: E402
from gpu_clocks import SAMPLER  # noqa: E402
import ring_eta  # noqa: E402
import attn_ref  # noqa: E402
from attn_ref import reference_rows  # noqa: E402,F401  (the fp32 reference: probe, check and the tests use it)
use_in_tree_package()  # (mkernel is imported late, in the functions that need it)

HEADS, HEAD_DIM = 32, 128
CHECK_S, CHECK_TOL = 1024, 2e-2  # end-to-end check: S_local, max |err| / max |ref|
PROBE_LSE_TOL = 1e-2              # backend probe: max |lse - lse_ref| (natural log)
BACKENDS = ("flash", "cudnn")
BASELINES = {"ring flash": ("ring", "flash"), "ring cudnn": ("ring", "cudnn"),
             "allgather flash": ("allgather", "flash"), "allgather cudnn": ("allgather", "cudnn"),
             "allgather-mk cudnn": ("allgather-mk", "cudnn"),
             "allgather-mk-overlap cudnn": ("allgather-mk-overlap", "cudnn")}


def baseline_candidates(emulated):
    """The baselines that can be the best one: on emulated nodes only those whose K/V cross the emulated
    network (mkernel's all-gather on the op's transport, as the TP benchmarks' 2x1 baselines); NCCL's ring
    and all-gather cross NVLink there (reported, not candidates)."""
    return tuple(n for n in BASELINES if not emulated or BASELINES[n][0].startswith("allgather-mk"))


@dataclass(frozen=True)
class Shape:
    b: int
    hkv: int
    s: int  # tokens per rank (S_local)
    causal: bool
    h: int = HEADS
    d: int = HEAD_DIM


@dataclass
class Ctx:
    rank: int
    world: int
    comm: object = None  # the mkernel communicator (for mk_variants)
    gqa: dict = field(default_factory=dict)    # (backend, hkv) -> "native" | "expand" | None (unusable)
    notes: dict = field(default_factory=dict)  # (backend, hkv) or (name, hkv, causal) -> why not measured
    checked: dict = field(default_factory=dict)  # Shape -> mkernel's output at it vs fp32 (sampled_check)
    rounds: dict = field(default_factory=dict)  # Shape -> name -> per-round ms (measure's per_round)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="ring-attention baselines (torchrun, one process per GPU)")
    ap.add_argument("--quick", action="store_true", help="B = 1, S_local = 8192 only")
    ap.add_argument("--batches", default="1,4", help="comma-separated B values")
    ap.add_argument("--seqs", default="2048,4096,8192,16384,32768", help="comma-separated S_local values (even)")
    ap.add_argument("--kv-heads", default="32,8", help=f"comma-separated Hkv values (divisors of {HEADS})")
    ap.add_argument("--masks", default="causal,full", help="comma-separated subset of causal, full")
    ap.add_argument("--only", default="",
                    help="comma-separated variant names to run (default: all; e.g. mkernel for a quick probe)")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lead-cycles", type=int, default=2_000_000,
                    help="GPU sleep before each timed call (~1 ms; keeps host launch cost off the clock; 0: none)")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches, args.seqs = "1", "8192"
    ints = lambda s: [int(x) for x in s.split(",") if x.strip()]  # noqa: E731
    args.batch_list, args.seq_list, args.kv_list = ints(args.batches), ints(args.seqs), ints(args.kv_heads)
    args.mask_list = [m.strip() for m in args.masks.split(",") if m.strip()]
    args.only_list = [n.strip() for n in args.only.split(",") if n.strip()]
    if any(m not in ("causal", "full") for m in args.mask_list):
        ap.error(f"--masks: expected a subset of causal, full (got {args.masks})")
    if any(s <= 0 or s % 2 for s in args.seq_list):
        ap.error("--seqs: every S_local must be a positive even number (2 zigzag chunks per rank)")
    if any(h <= 0 or HEADS % h for h in args.kv_list):
        ap.error(f"--kv-heads: every Hkv must divide {HEADS}")
    return args


def shapes(args):
    """Every measured shape, in table order."""
    return [Shape(b, hkv, s, mask == "causal") for mask in args.mask_list for hkv in args.kv_list
            for b in args.batch_list for s in args.seq_list]


def attn_flops(shape, world):
    """FLOPs of one rank's attention: 4 * B * H * S_local * S_global * D (two GEMMs), halved for causal."""
    f = 4 * shape.b * shape.h * shape.s * (world * shape.s) * shape.d
    return f // 2 if shape.causal else f


from ring_baselines import attention, baseline, compute_alone, rel_err  # noqa: E402


def mk_variants(args):
    """The mkernel columns: name -> build(shape, ctx) -> fn((q, k, v)) -> out (B, S_local, 32, 128) bf16,
    checked and timed like the baselines (ctx.comm is the mkernel communicator; causal inputs are zigzag
    shards, mkernel.zigzag_shard). The plan and out/lse are made in build (setup), not per call."""
    import mkernel

    def build(shape, ctx):
        state = {}

        def fn(qkv):
            q, k, v = qkv
            if "out" not in state:  # (poisoned: a row the kernel leaves unwritten fails check(), not a
                # correct result left behind in the allocator's reused memory by the variant checked before)
                state["out"] = torch.full_like(q, float("nan"))
                state["lse"] = torch.full((q.shape[0], q.shape[2], q.shape[1]), float("nan"), device=q.device)
            return mkernel.ring_attention(q, k, v, ctx.comm, causal=shape.causal, out=state["out"],
                                          lse=state["lse"])[0]

        def poison():  # NaN into out and lse: a row the next call leaves unwritten shows in the checks
            for t in ("out", "lse"):
                if t in state:
                    state[t].fill_(float("nan"))
        fn.last_lse, fn.poison_outputs = (lambda: state.get("lse")), poison  # (the checks read the LSE too)
        return fn
    return {"mkernel": build}


def why_not(name, shape, ctx):
    """Why variant `name` is not run at this shape, or None."""
    backend = BASELINES[name][1] if name in BASELINES else ring_eta.TORCH_BACKEND.get(name)
    if backend and ctx.gqa.get((backend, shape.hkv)) is None:
        return ctx.notes.get((backend, shape.hkv), "backend not probed")
    return ctx.notes.get((name, shape.hkv, shape.causal))


# ---- distributed plumbing (as in torch_tp_bench.py) ----

def probe(backend, expand, hkv, gen):
    """One local call of the backend (non-causal with more keys than queries; causal, square) against
    reference_rows: the (out, lse) contract the merges rely on. None, or why it fails."""
    dev, bf = torch.device("cuda"), torch.bfloat16
    q = torch.randn(1, 256, HEADS, HEAD_DIM, device=dev, dtype=bf, generator=gen)
    k, v = (torch.randn(1, 384, hkv, HEAD_DIM, device=dev, dtype=bf, generator=gen) for _ in range(2))
    try:
        attn = attention(backend, expand)
        for causal, kk, vv in ((False, k, v), (True, k[:, :256], v[:, :256])):
            o, lse = attn(q, kk, vv, causal)
            ro, rl = reference_rows(q, kk, vv, causal, torch.arange(256, device=dev))
            eo, el = rel_err(o, ro), (lse - rl).abs().max().item()
            if not (eo <= CHECK_TOL and el <= PROBE_LSE_TOL):
                return f"wrong result (causal={causal}): out rel err {eo:.3g}, lse abs err {el:.3g}"
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - recorded as unusable
        return short(e)
    return None


def check(builders, hkv, causal, ctx):
    """Every variant at S_local = CHECK_S, B = 1 against an fp32 single-GPU reference of the full sequence
    (this rank's rows); the error is max |out - ref| / max |ref|, max over ranks. A variant that raises is
    left out (ctx.notes); one that is wrong fails the run. Returns name -> error."""
    from mkernel.zigzag import zigzag_positions, zigzag_shard
    dev, world, rank, s = torch.device("cuda"), ctx.world, ctx.rank, CHECK_S
    shape = Shape(1, hkv, s, causal)
    gen = torch.Generator(device=dev).manual_seed(4321)  # the same full sequence on every rank
    full = [torch.randn(1, world * s, n, HEAD_DIM, device=dev, dtype=torch.bfloat16, generator=gen)
            for n in (HEADS, hkv, hkv)]
    if causal:
        local = tuple(zigzag_shard(t, rank, world) for t in full)
        rows = zigzag_positions(rank, world, s, device=dev)
    else:
        local = tuple(t[:, rank * s:(rank + 1) * s].contiguous() for t in full)
        rows = torch.arange(rank * s, (rank + 1) * s, device=dev)
    ref, ref_lse = reference_rows(*full, causal, rows)
    errs, issue_errs = {}, {}  # issue_errs: name -> (O rel Frobenius, LSE) of the variants that give their LSE
    for name, build in builders.items():
        if why_not(name, shape, ctx):
            continue
        err, got, lse = None, None, None
        try:
            fence()
            fn = build(shape, ctx)
            if hasattr(fn, "poison_outputs"):
                fn.poison_outputs()
            got = fn(local).float()
            lse = fn.last_lse() if hasattr(fn, "last_lse") else None
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - recorded as unavailable
            err = short(e)
        if not agree(err is None):
            ctx.notes[name, hkv, causal] = f"failed at the check: {err or 'on another rank'}"
            if rank == 0:
                print(f"check Hkv={hkv} causal={causal}: {name} left out: {ctx.notes[name, hkv, causal]}", flush=True)
            continue
        errs[name] = max_over_ranks([rel_err(got, ref) if torch.isfinite(got).all() else float("inf")])[0]
        if lse is not None:  # the issue's measures (a NaN, an unwritten row, reads as inf: max over ranks)
            eo, el = (nan_inf(x) for x in (attn_ref.out_error(got, ref), attn_ref.lse_error(lse, ref_lse)))
            issue_errs[name] = tuple(max_over_ranks([eo, el]))
    if rank == 0:
        print(f"check B=1 S_local={s} Hkv={hkv} causal={causal}: max|err|/max|ref| "
              + ", ".join(f"{n} {e:.2e}" for n, e in errs.items())
              + "".join(f"; {n}: O {eo:.2e}, LSE {el:.2e}" for n, (eo, el) in issue_errs.items()), flush=True)
    bad = {n: e for n, e in errs.items() if not e <= CHECK_TOL}
    bad.update({f"{n} (O {eo:.3g}, LSE {el:.3g}: the issue's bounds {attn_ref.OUT_BOUND:g}, "
                f"{attn_ref.LSE_BOUND:g})": eo for n, (eo, el) in issue_errs.items() if not attn_ref.within(eo, el)})
    for n, (eo, el) in issue_errs.items():
        errs[f"{n} O rel Frobenius"], errs[f"{n} LSE"] = eo, el
    if bad:
        raise RuntimeError(f"check Hkv={hkv} causal={causal}: wrong results (max|err|/max|ref| > {CHECK_TOL}): "
                           + ", ".join(f"{n} {e:.3g}" for n, e in bad.items()))
    return errs


def nan_inf(x):
    """inf for a NaN (an error measure over ranks: max() of a NaN is not defined)."""
    return float("inf") if x != x else x


SAMPLED_ROWS = 256  # query rows per rank of sampled_check, at least (sample_rows)
ROW_TILE = 128  # the query-row tile every one of which sample_rows reaches (the kernels' largest)
CHECK_COL = (f"mkernel vs fp32 (>= {SAMPLED_ROWS} rows per rank, one in every {ROW_TILE}-row tile: "
             "O rel Frobenius / LSE)")  # (tools/issue_targets.py reads the column by its start)


def sample_rows(s, causal, gen):
    """The query rows (of a rank's s) sampled_check compares, sorted: one random row in every ROW_TILE-row tile
    (a defect confined to one tile -- the last, a partial one -- is not left to chance), the first and last row of
    the shard and, causal, of each of its two zigzag chunks, then random others up to SAMPLED_ROWS in all."""
    tiles = torch.arange(0, s, ROW_TILE)
    within = (torch.rand(len(tiles), generator=gen) * (s - tiles).clamp(max=ROW_TILE)).long()
    edges = [0, s - 1] + ([s // 2 - 1, s // 2] if causal and s >= 2 else [])
    rows = set((tiles + within).tolist()) | set(edges)
    for r in torch.randperm(s, generator=gen).tolist():
        if len(rows) >= SAMPLED_ROWS:
            break
        rows.add(r)
    return torch.tensor(sorted(rows))


def sampled_check(shape, fn, qkv, ctx):
    """mkernel's output at a timed shape against the fp32 reference (attn_ref) on sample_rows' query rows
    of this rank's shard, over every key of the whole sequence (the K/V shards all-gathered over the ranks,
    unsharded): fn's out and lse poisoned, one call on qkv. Returns (O relative Frobenius error, LSE error), max
    over ranks, or why it was not checked (every rank agrees)."""
    from mkernel.zigzag import zigzag_positions, zigzag_unshard
    q, k, v = qkv
    world, rank, s = ctx.world, ctx.rank, shape.s

    def step(what, work):
        """work() on every rank, then agreed on: None, or why it failed (on this rank or another). The
        collectives (the gathers) run only in a step every rank entered: no rank waits in NCCL for a rank that
        failed before it (which would be in agree()'s gloo all-reduce)."""
        err = None
        try:
            work()
        except Exception as e:  # noqa: BLE001 - the row says so (a miss in tools/issue_targets.py)
            err = short(e)
        return None if agree(err is None) else f"not checked ({what}): {err or 'failed on another rank'}"

    st = {}

    def call():  # mkernel's output (poisoned first) and the gathers' buffers
        fence()
        fn.poison_outputs()
        st["out"], st["lse"] = fn(qkv), fn.last_lse()
        st["ks"], st["vs"] = [torch.empty_like(k) for _ in range(world)], [torch.empty_like(v) for _ in range(world)]
        torch.cuda.synchronize()

    def gather():
        dist.all_gather(st["ks"], k.contiguous())
        dist.all_gather(st["vs"], v.contiguous())
        torch.cuda.synchronize()

    def compare():
        ks, vs = st.pop("ks"), st.pop("vs")
        if shape.causal:
            kf, vf, pos = zigzag_unshard(ks), zigzag_unshard(vs), zigzag_positions(rank, world, s, device=q.device)
        else:
            kf, vf, pos = torch.cat(ks, 1), torch.cat(vs, 1), torch.arange(rank * s, (rank + 1) * s, device=q.device)
        del ks, vs
        g = torch.Generator().manual_seed(97 + rank)
        idx = sample_rows(s, shape.causal, g).to(q.device)
        ro, rl = attn_ref.reference_for(q[:, idx], kf, vf, shape.causal, pos[idx])
        st["errs"] = (nan_inf(attn_ref.out_error(st["out"][:, idx], ro)),
                      nan_inf(attn_ref.lse_error(st["lse"][:, :, idx], rl)))

    for what, work in (("the call", call), ("the K/V gathers", gather), ("the reference", compare)):
        why = step(what, work)
        if why:
            return why
    return tuple(max_over_ranks(list(st["errs"])))


def random_inputs(shape, gen):
    """One random (q, k, v) set of the shape, bf16 on the GPU."""
    def rnd(n):
        return torch.randn(shape.b, shape.s, n, shape.d, device="cuda", dtype=torch.bfloat16, generator=gen)
    return rnd(shape.h), rnd(shape.hkv), rnd(shape.hkv)


def input_pool(shape, gen, l2_bytes):
    """Random (q, k, v) sets, rotated call by call: together more than 2x L2, at least 2 of them."""
    nbytes = shape.b * shape.s * (shape.h + 2 * shape.hkv) * shape.d * 2
    return [random_inputs(shape, gen) for _ in range(max(2, min(8, -(-2 * l2_bytes // nbytes))))]


def run_shape(shape, builders, ctx, gen, args, l2_bytes):
    """Times every runnable variant at one shape. Returns (name -> ms, name -> why not measured now,
    network bytes: (nodes, min over ranks, max over ranks) of one more mkernel call, or None). A variant that
    fails (out of memory, say) to build or in its first call is left out with a reason starting
    'failed'; the inputs failing fail every variant. Every rank decides alike (agree() after each step that
    can fail on one rank only). A timed call that raises ends the run. Frees nothing collective: run() calls
    release() after every shape."""
    fns, errs, net, err = {}, {}, None, None
    try:
        pool = input_pool(shape, gen, l2_bytes)
    except Exception as e:  # noqa: BLE001 - the shape's row says failed
        pool, err = None, short(e)
    if not agree(err is None):
        return {}, {n: f"failed: inputs: {err or 'on another rank'}" for n in builders}, None
    for name, build in builders.items():
        why = why_not(name, shape, ctx)
        if why:
            errs[name] = why
            continue
        fn, err = None, None
        try:  # built, then called once untimed; each step agreed on (a plan's creation is collective)
            fence()
            fn = build(shape, ctx)
        except Exception as e:  # noqa: BLE001 - recorded in the table's notes
            fn, err = None, short(e)
        if agree(err is None):
            try:
                fn(pool[0])
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                fn, err = None, short(e)
            if agree(err is None):
                fns[name] = fn
                continue
        fn = None
        errs[name] = f"failed: {err or 'on another rank'}"
        gc.collect()  # what the failed variant held, before the next one builds
        torch.cuda.empty_cache()
    fence()
    # A timed call that raises ends the run (torchrun stops the other rank): a rank that failed inside a
    # collective cannot be agreed with, and the report keeps the shapes before this one.
    per_round = {}
    times = measure(fns, pool, args.rounds, args.warmup, args.lead_cycles, per_round=per_round) if fns else {}
    ctx.rounds[shape] = per_round
    if "mkernel" in times and ctx.comm is not None:
        # The network bytes of one more mkernel call, as this rank's host proxy counts them (every rank
        # drained and past a barrier, agree(), before and after: a peer that finished got all this rank put).
        fence()
        before, err = ctx.comm.network_bytes_put(), None
        try:
            fns["mkernel"](pool[1])
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - no byte count
            err = short(e)
        if agree(err is None):
            got = float(ctx.comm.network_bytes_put() - before)
            net = (ctx.comm.info()["num_nodes"], -max_over_ranks([-got])[0], max_over_ranks([got])[0])
    if "mkernel" in times and hasattr(fns["mkernel"], "poison_outputs"):  # its output at this shape, against fp32
        # on inputs no call has seen (after calls on others): a stale K/V shard from an earlier call, or a wait
        # that passed early, shows
        del pool
        qkv, err = None, None
        try:
            qkv = random_inputs(shape, gen)
        except Exception as e:  # noqa: BLE001 - the row says not checked
            err = short(e)
        ctx.checked[shape] = (sampled_check(shape, fns["mkernel"], qkv, ctx) if agree(err is None)
                              else f"not checked (fresh inputs): {err or 'failed on another rank'}")
    return times, errs, net


def release(ctx):
    """Collective, after every shape (measured or failed): frees its plans (ring attention, the all-gather of
    "comm mkernel") and their symmetric buffers -- kept for every shape they filled the GPU by the last
    shapes (the B=4 runs of 2026-11-30 lost mkernel there to a plan-creation timeout) -- and the memory
    torch caches."""
    gc.collect()
    fence()
    if "mkernel" in sys.modules and ctx.comm is not None:
        sys.modules["mkernel"].close_plans(ctx.comm)
    torch.cuda.empty_cache()


def fmt_row(config, shape, world, names, t, emulated=False, net=None, failed=(), topo=None, check=None,
            rounds=None):
    """One table row: ms and TFLOP/s of the baselines and mkernel, ms of the halves timed alone
    (ring_eta), the best baseline, mkernel's speedup over it, T_lb and eta (MEASURING.md), the MB one
    GPU sends per mkernel call over NVLink (the formula, topo = (nodes, GPUs per node)) and the network, and
    mkernel's output at this shape against fp32 (check: sampled_check's result; None: not run, '-'); rounds:
    name -> per-round ms (measure's per_round), for the best baseline's time over mkernel's round by round.
    failed: variants whose cells say 'failed' (not measured: '-')."""
    tf = lambda ms: attn_flops(shape, world) / (ms * 1e-3) / 1e12  # noqa: E731
    cells = []
    for n in names:
        miss = "failed" if n in failed else "-"
        if n in ring_eta.ALONE:
            cells.append(f"{t[n]:.3f}" if n in t else miss)
        else:
            cells += [f"{t[n]:.3f}", f"{tf(t[n]):.0f}"] if n in t else [miss, miss]
    base = {n: t[n] for n in baseline_candidates(emulated) if n in t}
    best = min(base, key=base.get) if base else None
    mk = [n for n in names if n not in BASELINES and n not in ring_eta.ALONE]
    cells.append(f"{best} ({base[best]:.3f} ms)" if best else "-")
    cells += [f"{base[best] / t[n]:.2f}" if best and n in t else "-" for n in mk]
    r = paired_ratio((rounds or {}).get(best), (rounds or {}).get("mkernel")) if best else None
    cells.append(" / ".join(f"{v:.4f}" for v in r) if r else "-")
    lb, comp, comm = ring_eta.lower_bound(t, emulated)
    cells.append(f"{lb:.3f} ({comp[0] if comp[1] >= comm[1] else comm[0]})" if lb else "-")
    cells += [f"{lb / t[n]:.2f}" if lb and n in t else "-" for n in mk]
    # NVLink MB one GPU sends per call: RingAttention::nvlink_bytes_sent's formula (no Python accessor).
    shard = shape.b * shape.hkv * 2 * shape.s * shape.d * 2
    cells.append(f"{shard * (topo[1] - 1) * topo[0] / 1e6:.1f}" if topo else "-")
    # Network MB one GPU sends per call: the formula (each K/V shard crosses once per other node,
    # RingAttention::network_bytes_sent) and what the proxies counted (run_shape: min-max over ranks).
    if net:
        nodes, lo, hi = net
        formula = shape.b * shape.hkv * 2 * shape.s * shape.d * 2 * (nodes - 1) / 1e6
        cells.append(f"{formula:.1f} / {lo / 1e6:.1f}" + (f"-{hi / 1e6:.1f}" if hi != lo else ""))
    else:
        cells.append("-")
    # (three digits: a 1.04e-02 must not print as 1.0e-02, under the bound the judge reads back)
    cells.append(f"{check[0]:.2e} / {check[1]:.2e}" if isinstance(check, tuple) else check or "-")
    head = [config, str(shape.b), str(shape.hkv), str(shape.s), "yes" if shape.causal else "no"]
    return "| " + " | ".join(head + cells) + " |"


def header(names):
    mk = [n for n in names if n not in BASELINES and n not in ring_eta.ALONE]
    cols = ["config", "B", "Hkv", "S_local", "causal"]
    for n in names:
        cols += [f"{n} ms"] if n in ring_eta.ALONE else [f"{n} ms", f"{n} TFLOP/s"]
    cols += ["best baseline"] + [f"{n} vs best baseline (x)" for n in mk]
    cols += ["mkernel vs best baseline per round (p10 / median / p90)"]
    cols += ["T_lb ms (bound by)"] + [f"eta {n}" for n in mk]
    cols += ["NVLink MB per GPU per mkernel call (formula)", "network MB per GPU per mkernel call (formula / measured)",
             CHECK_COL]
    return "| " + " | ".join(cols) + " |\n" + "|---" * len(cols) + "|"


def run(args, comm, rank, world):
    ctx = Ctx(rank, world, comm)
    builders = {name: baseline(*how) for name, how in BASELINES.items()}
    builders.update(mk_variants(args))
    timed = dict(builders, **ring_eta.eta_variants(compute_alone))  # + the halves alone (not checked)
    if args.only_list:
        unknown = [n for n in args.only_list if n not in timed]
        if unknown:
            raise SystemExit(f"--only: unknown variants {unknown} (known: {', '.join(timed)})")
        builders = {n: b for n, b in builders.items() if n in args.only_list}
        timed = {n: b for n, b in timed.items() if n in args.only_list}
    names = list(timed)
    gen = torch.Generator(device="cuda").manual_seed(1234 + rank)  # different data on every rank
    # 1. Each backend once per Hkv: native GQA, else K/V expanded, else unusable.
    for backend in BACKENDS:
        for hkv in args.kv_list:
            why = []
            for mode in ("native", "expand") if hkv != HEADS else ("native",):
                err = probe(backend, mode == "expand", hkv, gen)
                if agree(err is None):
                    ctx.gqa[backend, hkv] = mode
                    break
                why.append(f"{mode}: {err or 'failed on another rank'}")
            else:
                ctx.gqa[backend, hkv] = None
                ctx.notes[backend, hkv] = f"{backend} unusable at Hkv={hkv} (" + "; ".join(why) + ")"
            if rank == 0:
                print(f"probe {backend} Hkv={hkv}: {ctx.gqa[backend, hkv]}" + (f" ({'; '.join(why)})" if why else ""),
                      flush=True)
    # 2. Every variant against the fp32 reference.
    checks = {(hkv, causal): check(builders, hkv, causal, ctx)
              for causal in sorted({s.causal for s in shapes(args)}) for hkv in args.kv_list}
    # 3. Timing.
    l2 = getattr(torch.cuda.get_device_properties("cuda"), "L2_cache_size", 60 << 20)
    info = comm.info()
    config, emulated = config_label(info, num_hosts())  # (emulated nodes apply to mkernel only)
    topo = (info["num_nodes"], info["local_size"])  # (the NVLink column's formula)
    rows, notes = [], {}  # notes: "variant: why" -> the shapes it was not measured at
    started = datetime.datetime.now(datetime.timezone.utc)
    for shape in shapes(args):
        times, errs, net = run_shape(shape, timed, ctx, gen, args, l2)  # (agreed failures inside)
        release(ctx)  # collective, failed or not: the next shape starts with this one's memory given back
        for n, why in errs.items():
            notes.setdefault(f"{n}: {why}", []).append(f"B={shape.b} Hkv={shape.hkv} S_local={shape.s} "
                                                       f"{'causal' if shape.causal else 'full'}")
        failed = {n for n, why in errs.items() if why.startswith("failed")}
        rows.append(fmt_row(config, shape, world, names, times, emulated, net, failed=failed, topo=topo,
                            check=ctx.checked.get(shape), rounds=ctx.rounds.get(shape)))
        if rank == 0:
            print(rows[-1], flush=True)
            # The report so far, after every shape: a run cut at its call's bound keeps its rows
            # (tools/issue_targets.py merges rows per shape over reports).
            write_report(args, world, names, ctx, checks, rows, notes, emulated, now=started, quiet=True)
    if rank == 0:
        write_report(args, world, names, ctx, checks, rows, notes, emulated, now=started)


def main(args):
    import mkernel.torchrun  # needs libmkernel.so (the communicator for mk_variants)
    mkernel.torchrun.main(lambda comm, rank, world: run(args, comm, rank, world), backend="cpu:gloo,cuda:nccl")


def write_report(args, world, names, ctx, checks, rows, notes, emulated, now=None, quiet=False):
    """now: the run's start (the file's stamp: each shape's rewrite of the report keeps one file); quiet: a
    partial report written after a shape, not printed."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    try:
        from torch.cuda import nccl
        nccl_version = ".".join(map(str, nccl.version()))
    except Exception:  # noqa: BLE001 - header detail only
        nccl_version = "unknown"
    keys = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "MK_RANKS_PER_NODE",
            "MK_EMU_GBPS")  # (the emulated link's rate: tools/issue_targets.py's floor; None: the default)
    env = ", ".join(f"{k}={os.environ.get(k)}" for k in keys)
    commit = provenance()
    cmd = " ".join([f"torchrun --standalone --nproc_per_node={world} bench/torch_ring_attn_bench.py"] + sys.argv[1:])
    driver = sh("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader") or "unknown"
    gqa = "; ".join(f"{b} Hkv={h}: " + {"native": "native (Hkv heads passed to the op)",
                                         "expand": "K/V expanded to 32 heads (repeat_interleave) before each call",
                                         None: "unusable"}[m] for (b, h), m in ctx.gqa.items())
    chk = "; ".join(f"Hkv={h} causal={c}: " + ", ".join(f"{n} {e:.1e}" for n, e in errs.items())
                    for (h, c), errs in checks.items())
    lines = [f"# Ring attention (sequence parallel): torch baselines ({stamp})", "",
             f"- command: `{cmd}`",
             f"- date (UTC): {now.isoformat(timespec='seconds')}",
             f"- GPU: {torch.cuda.get_device_name()} x {world} (one node), driver {driver}",
             f"- torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
             f"NCCL {nccl_version}",
             f"- commit {commit}; env: {env}; MK_* set: {mk_environment()}",
             f"- world {world}; bf16; q (B, S_local, {HEADS}, {HEAD_DIM}), k and v (B, S_local, Hkv, {HEAD_DIM}); "
             "causal inputs zigzag-sharded (rank r: chunks r and 2W-1-r of 2W); non-causal: contiguous shards",
             f"- timing: {args.rounds} rounds after {args.warmup} warm-up rounds, one call of each variant per round, "
             f"order rotated per round; before each call a host sync + barrier, then a GPU sleep of "
             f"{args.lead_cycles} cycles (at the top SM clock, timed: mk_gpu_spin; host launch cost off the clock); "
             "CUDA events around the call on the compute stream; each call's time the max over ranks, then the "
             "median; inputs rotate through pre-generated random sets (together > 2x L2, at least 2)",
             f"- GPU clocks: {SAMPLER.summary()}",
             "- TFLOP/s per GPU = 4 B H S_local S_global D / time, halved for causal",
             "- ring flash / ring cudnn: W-1 steps of K,V to the next rank (dist.batch_isend_irecv from a side "
             "stream) overlapped with the step's attention (torch.ops.aten._scaled_dot_product_flash_attention / "
             "_scaled_dot_product_cudnn_attention); out and lse merged in fp32 (logaddexp), cast to bf16 at the "
             "end; zigzag causal steps: own K/V causal, earlier rank: all queries x its first half, later rank: "
             "second half of the queries x all",
             "- allgather flash / allgather cudnn: dist.all_gather_into_tensor of K and V (one call per batch "
             "element and tensor; causal: two, second halves then first halves), then attention, no overlap; "
             "causal: per local chunk a causal call against its own K/V and a non-causal call against all "
             "earlier chunks, merged in fp32",
             "- allgather-mk cudnn: the same with mkernel.all_gather (the op's own transport) instead of NCCL's; "
             "allgather-mk-overlap cudnn: that gather on a side stream while the compute stream attends to the "
             "rank's own K/V, then to the others' (merged in fp32)"
             + ("; on emulated nodes the best baseline is taken among these only (NCCL's ring and all-gather "
                "cross NVLink there, not the emulated network: shown, not candidates)" if emulated else ""),
             "- halves alone (bench/ring_eta.py, own random inputs, timed in the same rotation, not checked): "
             "compute flash / compute cudnn: the all-gather baseline's attention without its all-gather; compute "
             "mkernel: mkernel.attention (one call per local chunk, bottom-right causal); comm nccl: one "
             "dist.all_gather_into_tensor of the K+V bytes; comm mkernel: one mkernel.all_gather of them",
             "- network MB per GPU per mkernel call: the formula B x Hkv x 2 x S_local x D x 2 B x (nodes - 1) "
             "(each K/V shard crosses the network once per other node) / the bytes this rank's host proxy took "
             "during one more call (min-max over ranks; mkernel.Communicator.network_bytes_put); NVLink MB per "
             "GPU per mkernel call: the formula B x Hkv x 2 x S_local x D x 2 B x (GPUs per node - 1) x nodes "
             "(its own K/V shard and those from other nodes, to each node peer: RingAttention::nvlink_bytes_sent, "
             "computed here: Python has no accessor for it)",
             "- a variant that fails to build or in its first call (out of memory, say) has cells saying 'failed' "
             "(why: under 'Not measured'); every rank agrees on it, the shape's memory is given back, and the run "
             "goes on; a timed call that fails ends the run (the rows before it stay)",
             "- T_lb = max(fastest compute alone, fastest comm alone); eta = T_lb / T_mkernel (MEASURING.md)"
             + ("; emulated nodes: comm nccl crosses NVLink, not the emulated network, so only comm mkernel "
                "bounds the network" if emulated else ""),
             "- mkernel vs best baseline per round: the best baseline's time over mkernel's round by round (both "
             "calls of a round share the GPU's clock), p10 / median / p90: where it straddles 1, the two are within "
             "the run's spread",
             f"- GQA: {gqa}",
             f"- check (B=1, S_local={CHECK_S}, vs an fp32 single-GPU reference of the full sequence, max|err|/"
             f"max|ref|, max over ranks, must be <= {CHECK_TOL}; mkernel's also by the issue's measures, O's "
             f"relative Frobenius error < {attn_ref.OUT_BOUND:g} and LSE's max |d| / max(|ref|, 1) < "
             f"{attn_ref.LSE_BOUND:g}, else the run fails): {chk}",
             f"- {CHECK_COL}: at every timed shape, after the timing, mkernel's out and lse (poisoned first) from "
             "one more call, on fresh random inputs, against the fp32 reference (bench/attn_ref.py) on sample_rows' "
             f"query rows of each rank's shard (one in every {ROW_TILE}-row tile, each zigzag chunk's first and last, "
             f"at least {SAMPLED_ROWS}) over every key of the whole sequence, max over ranks; the issue's bounds "
             f"{attn_ref.OUT_BOUND:g} / {attn_ref.LSE_BOUND:g} (tools/issue_targets.py: a row above them, or not "
             "checked, is a wrong output)", ""]
    text = "\n".join(lines) + "\n" + header(names) + "\n" + "\n".join(rows) + "\n"
    if notes:
        text += "\nNot measured:\n\n" + "\n".join(f"- {n} ({', '.join(at)})" for n, at in notes.items()) + "\n"
    if not quiet:
        print("\n" + text, flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"torch-ring-attn-{stamp}.md")
    with open(path + ".part", "w") as f:
        f.write(text)
    os.replace(path + ".part", path)  # (whole: a call cut at its bound leaves the rows so far, not half a file)
    if not quiet:
        print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main(parse_args())
