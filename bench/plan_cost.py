"""What a new shape costs: the first call of a tensor-parallel op on a shape (the plan is made there,
collectively) against the next call on the same shape, and mkernel.close_plans (the plans destroyed, their
memory and, on one node, their signal words given back), per op and m:

    torchrun --standalone --nproc_per_node=W bench/plan_cost.py [--out DIR] [--reps N]

Each sample: host wall time from before the call (after a device sync and a barrier) to after a device sync;
a new shape every repetition (m grows by 128 W rows), n = 8192, k = 1024 (a short GEMM: the figure is mostly the
host's). Medians over the repetitions, then the max over ranks. Ranks sharing one GPU (MK_SHARE_GPUS=1)
time-slice it: their steady calls then include the other rank's kernels, so read the difference of the first
call and the steady one.
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_timing import use_in_tree_package  # noqa: E402

use_in_tree_package()
import mkernel  # noqa: E402
import mkernel.torchrun  # noqa: E402
from mkernel import tp  # noqa: E402
from mkernel._lib import knob_bool  # noqa: E402


def timed(fn):
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def parse_args(argv=None):  # (before torchrun's set-up: --help and a bad argument need no GPU)
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--reps", type=int, default=7)
    return ap.parse_args(argv)


def run(comm, rank, world, args):
    n, k = 8192, 1024
    w = torch.randn(n, k, device="cuda").bfloat16()
    ops = {
        "gemm_rs": lambda m: (lambda x: mkernel.gemm_rs(x, w, comm), torch.randn(m, k, device="cuda").bfloat16()),
        "gemm_ar": lambda m: (lambda x: mkernel.gemm_ar(x, w, comm), torch.randn(m, k, device="cuda").bfloat16()),
        "ag_gemm": lambda m: (lambda x: mkernel.ag_gemm(x, w, comm),
                              torch.randn(m // world, k, device="cuda").bfloat16()),
    }
    rows = []
    tp.close_plans(comm)
    for name, make in ops.items():
        for m in (1024, 8192):
            first, steady, close = [], [], []
            for rep in range(args.reps):
                f, x = make(m + 128 * world * (rep + 1))
                first.append(timed(lambda: f(x)))
                steady.append(timed(lambda: f(x)))
                close.append(timed(lambda: tp.close_plans(comm)))
            mine = torch.tensor([statistics.median(first), statistics.median(steady), statistics.median(close)])
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
            rows.append((name, m, *mine.tolist()))
    if rank != 0:
        return
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    share = " (ranks sharing one GPU)" if knob_bool("MK_SHARE_GPUS") else ""  # (the library's spellings)
    lines = [f"# What a new shape costs ({stamp}, W = {world}{share}, {torch.cuda.get_device_name()})", "",
             f"- command: `torchrun --standalone --nproc_per_node={world} bench/plan_cost.py --reps {args.reps}`",
             f"- n = {n}, k = {k}; a new m each repetition (m + 128 W (rep + 1)); ms, median over {args.reps} "
             "repetitions, max over ranks", "",
             "| op | m | first call (plan made) | next call | first - next | close_plans (one plan) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {o} | {m} | {a:.2f} | {b:.2f} | {a - b:.2f} | {c:.2f} |" for o, m, a, b, c in rows]
    text = "\n".join(lines) + "\n"
    print(text, flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"plan-cost-{stamp}.md"), "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    _args = parse_args()
    mkernel.torchrun.main(lambda comm, rank, world: run(comm, rank, world, _args))
