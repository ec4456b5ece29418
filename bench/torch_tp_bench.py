"""mkernel's tensor-parallel ops against serial torch and PyTorch's async-TP ops,
interleaved call by call in one run (device machine, one node):

    torchrun --standalone --nproc_per_node=2 bench/torch_tp_bench.py [--quick] [--ops ag,rs,ar] [--out DIR]

Widths hidden 8192, FFN 28672 (Llama-3-70B-like), bf16, W = world size, per M:
  AG+GEMM (column-parallel): x_shard [M/W, 8192], w [28672/W, 8192] -> [M, 28672/W]
    serial: dist.all_gather_into_tensor + torch.matmul
    torch fused: torch.ops.symm_mem.fused_all_gather_matmul
    mkernel: mkernel.ag_gemm (out= preallocated)
  GEMM+RS (row-parallel): h [M, 28672/W], w [8192, 28672/W] -> [M/W, 8192]
    serial: torch.matmul + dist.reduce_scatter_tensor
    torch fused: torch.ops.symm_mem.fused_matmul_reduce_scatter
    mkernel: mkernel.gemm_rs (out= preallocated)
  GEMM+AR (row-parallel, the sum on every rank: the MLP down-projection): h [M, 28672/W],
  w [8192, 28672/W] -> [M, 8192]
    serial: torch.matmul + dist.all_reduce (NCCL)
    torch symm 1-shot / 2-shot: torch.matmul into a symmetric-memory buffer, then
      torch.ops.symm_mem.one_shot_all_reduce_out / two_shot_all_reduce_out (no multicast;
      PyTorch has no fused matmul + all-reduce op)
    mkernel: mkernel.gemm_ar (out= preallocated)
Timing per the project's MEASURING.md (shared/); the report header spells it out.
Rank 0 writes torch-tp-<UTC stamp>.md under --out, rewritten after every shape: a shape that fails (a
check, an exception) leaves the rows before it, its own row as 'failed' and why, and the run exits non-zero.
NVLink multicast stays off.
"""
import os

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import argparse, datetime, sys, warnings  # noqa: E401,E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_timing import agree, fence, max_over_ranks, measure, provenance, sh, short  # noqa: E402,F401
from dist_timing import config_label, num_hosts, paired_ratio  # noqa: E402
from dist_timing import mk_environment, use_in_tree_package  # noqa: E402
from gpu_clocks import SAMPLER  # noqa: E402

use_in_tree_package()
import mkernel  # noqa: E402
import mkernel.torchrun  # noqa: E402

HIDDEN, FFN = 8192, 28672
OPS = {"ag": "AG+GEMM", "rs": "GEMM+RS", "ar": "GEMM+AR"}
# PyTorch's variants per op, measured beside serial and mkernel.
PEERS = {"AG+GEMM": ("torch fused",), "GEMM+RS": ("torch fused",),
         "GEMM+AR": ("torch symm 1-shot", "torch symm 2-shot")}


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="M = 4096 only")
    ap.add_argument("--ops", default="ag,rs,ar", help="comma-separated subset of ag (AG+GEMM), rs (GEMM+RS), "
                    "ar (GEMM+AR)")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lead-cycles", type=int, default=None,
                    help="GPU sleep before each timed call (default ~1 ms, 2000000 cycles: keeps host launch cost "
                    "off the clock; with --back-to-back 0; 0: none)")
    ap.add_argument("--back-to-back", action="store_true",
                    help="time each call after a barrier queued on the stream (a 1-element NCCL all-reduce) "
                    "instead of a host sync + host barrier, without the GPU sleep: the calls run back to back, "
                    "as mkbench's, at the power cap of sustained work rather than from a rested GPU")
    args = ap.parse_args()
    if args.lead_cycles is None:
        args.lead_cycles = 0 if args.back_to_back else 2_000_000
    if args.lead_cycles < 0 or args.rounds < 1 or args.warmup < 0:
        ap.error("--lead-cycles and --warmup must be >= 0, --rounds >= 1")
    return args


def load_symm_mem():
    """torch.ops.symm_mem or None, and why not (each op is looked up where it is used: need())."""
    try:
        import torch.distributed._symmetric_memory as symm_mem
        ops = torch.ops.symm_mem
        # Deprecated in torch 2.11 ("no need to call"), required by older ones; the ops'
        # first call (in the correctness check) decides whether they are usable.
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                symm_mem.enable_symm_mem_for_group(str(dist.group.WORLD.group_name))
        except Exception:  # noqa: BLE001
            pass
        return ops, None
    except Exception as e:  # noqa: BLE001 - recorded in the table
        return None, short(e)


def need(ops, name):
    """torch.ops.symm_mem.<name>; raises (recorded as unavailable) when this torch lacks it."""
    if not hasattr(ops, name):
        raise RuntimeError(f"torch.ops.symm_mem.{name} not in torch {torch.__version__}")
    return getattr(ops, name)


def mk_has(symbol):
    from mkernel._lib import lib
    return hasattr(lib, symbol)


def check(op, m, outs):
    """Every output against serial's: max abs error and relative Frobenius error, max over ranks."""
    ref = outs["serial"].float()
    names = [n for n in outs if n != "serial"]
    vals = []
    for n in names:
        got = outs[n].float()
        if tuple(got.shape) != tuple(ref.shape) or not torch.isfinite(got).all():
            vals += [float("inf"), float("inf")]
            continue
        d = got - ref
        vals += [(d.abs().max() / (0.02 * ref.abs().max() + 1e-2)).item(), (d.norm() / ref.norm()).item()]
    vals = max_over_ranks(vals) if vals else []
    bad = [f"{n}: max|err| = {vals[2 * i]:.3g} x (0.02 max|ref| + 0.01), rel Frobenius {vals[2 * i + 1]:.3g}"
           for i, n in enumerate(names) if not (vals[2 * i] <= 1.0 and vals[2 * i + 1] < 1e-2)]
    if bad:
        raise RuntimeError(f"{op} M={m}: outputs disagree with serial (worst rank shown): " + "; ".join(bad))


def check_after(op, m, fns, x, outs_poisoned, before_each):
    """After the timing: every variant once more on fresh input x, its outputs poisoned first, each call after
    before_each() as timed (the device barrier, --back-to-back; else fence()), then check(). The check before the
    timing sees a plan's first call only; this one a call after many, on inputs none of them had."""
    for t in outs_poisoned:
        t.fill_(float("nan"))
    outs = {}
    for name, fn in fns.items():
        before_each()
        outs[name] = fn(x).clone()
    torch.cuda.synchronize()
    check(op, m, outs)


def run_shape(op, m, comm, world, ops, notes, group_name, gen, args, l2_bytes):
    """One M of one op: checks, then times serial, PyTorch's variants (PEERS[op], but not those with
    a note: unavailable or failed at an earlier M) and mkernel. Returns (name -> ms, name -> why a
    PyTorch variant failed now)."""
    dev, bf = torch.device("cuda"), torch.bfloat16

    def rnd(*shape):
        return (torch.rand(*shape, device=dev, generator=gen) - 0.5).to(bf)

    def copies(*shape):
        nbytes = shape[0] * shape[1] * 2
        return [rnd(*shape) for _ in range(max(4, -(-2 * l2_bytes // nbytes)))]

    nan = float("nan")
    peers, errs = {}, {}
    if op == "AG+GEMM":
        m_loc, n_loc = m // world, FFN // world
        w = rnd(n_loc, HIDDEN)
        gathered, out_s, out_m = (torch.empty(m, c, device=dev, dtype=bf) for c in (HIDDEN, n_loc, n_loc))

        def serial(x):
            dist.all_gather_into_tensor(gathered, x)
            return torch.matmul(gathered, w.t(), out=out_s)

        def fused(x):  # returns (gathered A, [A @ B]); B = w^T is a view, no copy
            return need(ops, "fused_all_gather_matmul")(x, [w.t()], 0, group_name)[1][0]

        def mk(x):
            return mkernel.ag_gemm(x, w, comm, out=out_m)
        peers["torch fused"], outs_poisoned, in_shape = fused, (out_s, out_m), (m_loc, HIDDEN)
    elif op == "GEMM+RS":
        k_loc = FFN // world
        w = rnd(HIDDEN, k_loc)
        partial, out_s, out_m = (torch.empty(r, HIDDEN, device=dev, dtype=bf) for r in (m, m // world, m // world))

        def serial(h):
            torch.matmul(h, w.t(), out=partial)
            dist.reduce_scatter_tensor(out_s, partial)
            return out_s

        def fused(h):
            return need(ops, "fused_matmul_reduce_scatter")(h, w.t(), "sum", 0, group_name)

        def mk(h):
            return mkernel.gemm_rs(h, w, comm, out=out_m)
        peers["torch fused"], outs_poisoned, in_shape = fused, (out_s, out_m), (m, k_loc)
    else:  # GEMM+AR
        k_loc = FFN // world
        w = rnd(HIDDEN, k_loc)
        out_s, out_1, out_2, out_m = (torch.empty(m, HIDDEN, device=dev, dtype=bf) for _ in range(4))
        symm, err = None, None
        if ops is not None and any(p not in notes for p in PEERS[op]):
            try:  # the matmul's output buffer, in symmetric memory (rendezvous is collective)
                import torch.distributed._symmetric_memory as symm_mem
                symm = symm_mem.empty(m, HIDDEN, dtype=bf, device=dev)
                symm_mem.rendezvous(symm, group_name)
            except Exception as e:  # noqa: BLE001 - recorded as unavailable
                err = short(e)
            if not agree(err is None):
                symm = None
                errs = {p: err or "symmetric buffer failed on another rank" for p in PEERS[op] if p not in notes}

        def serial(h):
            torch.matmul(h, w.t(), out=out_s)
            dist.all_reduce(out_s)
            return out_s

        def one_shot(h):  # every rank reads every peer's whole buffer
            torch.matmul(h, w.t(), out=symm)
            return need(ops, "one_shot_all_reduce_out")(symm, "sum", group_name, out_1)

        def two_shot(h):  # reduce-scatter then all-gather through the buffers (overwrites symm)
            torch.matmul(h, w.t(), out=symm)
            return need(ops, "two_shot_all_reduce_out")(symm, "sum", group_name, out_2)

        def mk(h):
            return mkernel.gemm_ar(h, w, comm, out=out_m)
        if symm is not None:
            peers = {"torch symm 1-shot": one_shot, "torch symm 2-shot": two_shot}
        outs_poisoned, in_shape = (out_s, out_1, out_2, out_m), (m, k_loc)
    peers = {p: f for p, f in peers.items() if ops is not None and p not in notes and p not in errs}
    with_mk = "mkernel" not in notes  # (GEMM+AR: a library without gemm_ar)

    fns = {"serial": serial, **peers}
    if with_mk:
        fns["mkernel"] = mk
    # Correctness once, outside the timing: fresh random input, outputs poisoned first.
    x = rnd(*in_shape)
    for t in outs_poisoned:
        t.fill_(nan)
    outs = {"serial": serial(x).clone()}
    if with_mk:
        outs["mkernel"] = mk(x).clone()
    for name, fn in peers.items():
        err = None
        try:
            fence()
            outs[name] = fn(x).clone()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - recorded as unavailable
            err = short(e)
        if not agree(err is None):
            fns.pop(name)
            outs.pop(name, None)
            errs[name] = err or "failed on another rank"
    fence()
    check(op, m, outs)
    del outs, x
    flag = torch.zeros(1, device=dev)  # the device barrier's all-reduce (--back-to-back)
    barrier = (lambda: dist.all_reduce(flag)) if args.back_to_back else None
    rounds = {}  # name -> per-round ms (the last column: mkernel against the fastest PyTorch variant, per round)
    times = measure(fns, copies(*in_shape), args.rounds, args.warmup, args.lead_cycles, device_barrier=barrier,
                    per_round=rounds)
    check_after(op, m, fns, rnd(*in_shape), outs_poisoned, barrier or fence)
    torch.cuda.synchronize()
    dist.barrier()
    mkernel.close_plans(comm)  # collective; frees this shape's symmetric buffers
    return times, errs, rounds


def fmt_row(config, op, m, t, notes, rounds=None):
    """rounds: name -> per-round ms (measure's per_round): the last cell, the fastest PyTorch variant's time over
    mkernel's round by round, p10 / median / p90 ('-' without both)."""
    s, k = t["serial"], t.get("mkernel")
    peer = [t.get(p) for p in PEERS[op]]
    best = min((v for v in peer if v), default=None)  # the fastest PyTorch variant
    x = lambda a, b: f"{a / b:.2f}" if a and b else "-"  # noqa: E731
    cols = [f"{v:.3f}" if v else notes.get(p, "-") for p, v in zip(PEERS[op], peer)]
    kcol = f"{k:.3f}" if k else notes.get("mkernel", "-")
    fastest = next((p for p, v in zip(PEERS[op], peer) if v and v == best), None)
    r = paired_ratio((rounds or {}).get(fastest), (rounds or {}).get("mkernel")) if fastest and k else None
    paired = " / ".join(f"{v:.4f}" for v in r) if r else "-"
    return "| " + " | ".join([config, str(m), f"{s:.3f}", *cols, kcol, x(s, best), x(best, k), x(s, k),
                              paired]) + " |"


def failed_row(config, op, m):
    """The row of a shape whose run failed (a wrong output, an exception): every measured cell 'failed'
    (tools/issue_targets.py counts it as a miss), the reason below the table."""
    n = len(header(op).split("\n")[0].strip("|").split("|"))
    return "| " + " | ".join([config, str(m)] + ["failed"] * (n - 2)) + " |"


def header(op):
    if op == "GEMM+AR":
        cols = ["torch symm 1-shot ms", "torch symm 2-shot ms", "mkernel ms", "best torch symm vs serial (x)",
                "mkernel vs best torch symm (x)"]
    else:
        cols = ["torch fused ms", "mkernel ms", "torch fused vs serial (x)", "mkernel vs torch fused (x)"]
    cols = ["config", "M", "serial ms", *cols, "mkernel vs serial (x)",
            "mkernel vs fastest torch per round (p10 / median / p90)"]
    return "| " + " | ".join(cols) + " |\n" + "|---" * len(cols) + "|"


def main(args):
    ms = [4096] if args.quick else [1024, 2048, 4096, 8192, 16384]
    ops_wanted = [OPS[o.strip()] for o in args.ops.split(",") if o.strip()]

    def run(comm, rank, world):
        if comm.world != world or FFN % world or any(m % world for m in ms):
            raise RuntimeError(f"world {world} (mkernel comm world {comm.world}) must divide {FFN} and every M")
        ops, why = load_symm_mem()
        if not agree(ops is not None):
            ops, why = None, why or "unavailable on another rank"
        group_name = str(dist.group.WORLD.group_name)
        gen = torch.Generator(device="cuda").manual_seed(1234 + rank)  # different data on every rank
        l2 = getattr(torch.cuda.get_device_properties("cuda"), "L2_cache_size", 60 << 20)
        config, _ = config_label(comm.info(), num_hosts())  # (emulated nodes apply to mkernel only)
        if args.back_to_back:  # another regime (tools/issue_targets.py judges it beside the default's rows)
            config += " back-to-back"
        sections, failed = [], []
        section = lambda op, rows: f"## {op}\n\n{header(op)}\n" + "\n".join(rows)  # noqa: E731
        started = datetime.datetime.now(datetime.timezone.utc)  # the report's stamp: one file, rewritten per shape
        for op in ops_wanted:
            # name -> why not measured (kept for the later M's: a failed symm_mem op may leave peers out of step)
            notes = {p: f"unavailable: {why}" for p in PEERS[op]} if ops is None else {}
            if op == "GEMM+AR" and not agree(mk_has("mk_gemm_ar_create")):
                notes["mkernel"] = "libmkernel without gemm_ar"
            rows = []
            for m in ms:
                try:
                    times, errs, rounds = run_shape(op, m, comm, world, ops, notes, group_name, gen, args, l2)
                except Exception as e:
                    # A failed check (every rank raises it: check() compares maxima over ranks) or another
                    # failure: the report keeps the rows so far, this shape's failed row and why; the run fails.
                    rows.append(failed_row(config, op, m))
                    failed.append(f"{op} M={m}: {short(e, 600)}")
                    if rank == 0:
                        write_report(args, world, sections + [section(op, rows)], failed, now=started)
                    raise
                for p, err in errs.items():
                    notes[p] = f"unavailable: {err} (at M={m})"
                    if rank == 0:
                        print(f"{op} M={m}: {p} failed: {err}", flush=True)
                rows.append(fmt_row(config, op, m, times, notes, rounds))
                if rank == 0:
                    print(rows[-1], flush=True)
                    # The report so far, after every shape: a failure later keeps these rows.
                    write_report(args, world, sections + [section(op, rows)], failed, now=started, quiet=True)
            sections.append(section(op, rows))
        if rank == 0:
            write_report(args, world, sections, failed, now=started)

    mkernel.torchrun.main(run, backend="cpu:gloo,cuda:nccl")


def write_report(args, world, sections, failed=(), now=None, quiet=False):
    """now: the run's start (the file's stamp: every rewrite after a shape replaces one file); quiet: the
    partial report written after a shape, not printed; failed: 'op M=m: why' of a shape that failed."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    try:
        from torch.cuda import nccl
        nccl_version = ".".join(map(str, nccl.version()))
    except Exception:  # noqa: BLE001 - header detail only
        nccl_version = "unknown"
    keys = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "MK_RANKS_PER_NODE")
    env = ", ".join(f"{k}={os.environ.get(k)}" for k in keys)
    commit = provenance()
    cmd = " ".join([f"torchrun --standalone --nproc_per_node={world} bench/torch_tp_bench.py"] + sys.argv[1:])
    driver = sh("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader") or "unknown"
    lines = [f"# Tensor-parallel ops: serial torch vs torch async-TP vs mkernel ({stamp})", "",
             f"- command: `{cmd}`",
             f"- date (UTC): {now.isoformat(timespec='seconds')}",
             f"- GPU: {torch.cuda.get_device_name()} x {world} (one node), driver {driver}",
             f"- torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl_version}",
             f"- commit {commit}",
             f"- world {world}; bf16; hidden {HIDDEN}, FFN {FFN}; env: {env}; MK_* set: {mk_environment()}",
             f"- timing: {args.rounds} rounds after {args.warmup} warm-up rounds, one call of each variant per round, "
             f"order rotated per round; before each call "
             + ("a barrier queued on the stream (1-element NCCL all-reduce), no host sync (--back-to-back: the "
                "calls run back to back, as mkbench's; the host's launches stay off the clock only while the host "
                "runs ahead of the GPU, not for the first timed call, which follows the warm-up's sync)"
                if args.back_to_back else "a host sync + barrier (the GPU rests between calls)")
             + (f", then a GPU sleep of {args.lead_cycles} cycles (at the top SM clock, timed: mk_gpu_spin; host "
               "launch cost off the clock)"
                if args.lead_cycles > 0 else ", no GPU sleep")
             + "; CUDA events around the call; each call's "
             "time the max over ranks, then the median; "
             "activations rotate through copies that together exceed 2x L2",
             f"- GPU clocks: {SAMPLER.summary()}",
             "- last column: the fastest PyTorch variant's time over mkernel's round by round (both calls of a round "
             "share the GPU's clock), p10 / median / p90: where it straddles 1, the two are within the run's spread",
             "- (x) columns are speedups: serial/torch fused, torch fused/mkernel, serial/mkernel (>1: faster); "
             "for GEMM+AR the fastest of the two torch symm variants stands for torch fused",
             "- torch fused = torch.ops.symm_mem.fused_all_gather_matmul (B = w^T view, gather_dim 0, return_A "
             "default True) / fused_matmul_reduce_scatter(h, w^T, 'sum', 0); plain-memory inputs: the ops copy "
             "into their own symmetric workspace",
             "- GEMM+AR: serial = torch.matmul + dist.all_reduce (NCCL); torch symm 1-shot / 2-shot = torch.matmul "
             "straight into a symmetric-memory buffer (symm_mem.empty + rendezvous, made once per M), then "
             "torch.ops.symm_mem.one_shot_all_reduce_out / two_shot_all_reduce_out into a plain tensor (no "
             "multicast; PyTorch has no fused matmul + all-reduce); mkernel = mkernel.gemm_ar",
             f"- ops: {args.ops}; every variant's output checked against serial once per M (max|err| <= 0.02 "
             "max|ref| + 0.01, relative Frobenius < 1e-2), outputs poisoned with NaN first, PyTorch's variants "
             "after a host sync + barrier"
             + ("; with --back-to-back again after the timing, every variant on one input in one back-to-back "
                "round (the timed sequencing)" if args.back_to_back else ""), ""]
    text = "\n".join(lines) + "\n" + "\n\n".join(sections) + "\n"
    if failed:
        text += ("\nFailed (the run stopped there, exit status non-zero):\n\n"
                 + "\n".join(f"- {f}" for f in failed) + "\n")
    if not quiet:
        print("\n" + text, flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"torch-tp-{stamp}.md")
    with open(path + ".part", "w") as f:
        f.write(text)
    os.replace(path + ".part", path)  # whole: a run cut while writing leaves the previous version, not half a file
    if not quiet:
        print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main(parse_args())
