"""The tensor-parallel ops' GEMM machinery on one GPU (W = 1: no communication), at the per-rank shapes
of the 1x2 issue benchmarks, against cuBLAS (torch.matmul) and mkernel.gemm in the same run:

    torchrun --standalone --nproc_per_node=1 bench/tp_engine_1gpu.py [--out DIR]

One rank mostly runs the standalone GEMM (MK_TP_SINGLE_RANK=auto, the default: nothing to gather or
reduce); this script sets MK_TP_SINGLE_RANK=fused (unless already set: plain or auto time those paths),
so that a plan runs its whole kernel (tile walk, dynamic queue, split tiles, comm CTAs that find nothing
to send and join the compute) with every wait satisfied at once, so the difference to cuBLAS is what
the engine and the plan's schedule cost before any NVLink or network traffic:
  ag_gemm  a [M, 8192] x w [14336, 8192]^T  (AllGather+GEMM, hidden 8192, FFN 28672 / 2)
  gemm_rs  h [M, 14336] x w [8192, 14336]^T (GEMM+ReduceScatter; GEMM+AllReduce the same GEMM)
Timing: the torch benchmarks' loop (bench/dist_timing.py measure: CUDA events around each call after
a host sync and a GPU sleep that takes the host's launch cost off the clock, variants rotated per
round, medians); inputs rotate through copies that together exceed 4x the L2; random bf16 data.
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist

import dist_timing  # bench/, the script's own directory
import mkernel

ROUNDS, WARMUP, LEAD_CYCLES = 20, 3, 2_000_000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--ms", default="1024,2048,4096")
    args = ap.parse_args()
    if int(os.environ.get("WORLD_SIZE", "1")) != 1:
        raise SystemExit("tp_engine_1gpu.py: run it as one rank (torchrun --nproc_per_node=1)")
    os.environ.setdefault("MK_TP_SINGLE_RANK", "fused")  # read when a plan is made (module docstring)
    dist.init_process_group("gloo")
    torch.cuda.set_device(0)
    comm = mkernel.init()
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 60 << 20)  # (torch 2.4 lacks it)
    rows = []
    for kind, n, k in (("ag_gemm", 14336, 8192), ("gemm_rs", 8192, 14336)):
        for m in [int(x) for x in args.ms.split(",")]:
            copies = max(2, (4 * l2) // ((m * k + n * k) * 2) + 1)
            a = [torch.rand(m, k, device="cuda").sub_(0.5).to(torch.bfloat16) for _ in range(copies)]
            w = [torch.rand(n, k, device="cuda").sub_(0.5).to(torch.bfloat16) for _ in range(copies)]
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            variants = {
                "cuBLAS (torch.matmul)": lambda i: torch.matmul(a[i], w[i].t(), out=out),
                "mkernel.gemm": lambda i: mkernel.gemm(a[i], w[i], out=out),
            }
            if kind == "ag_gemm":
                variants["mkernel.ag_gemm (W=1)"] = lambda i: mkernel.ag_gemm(a[i], w[i], comm, out=out)
            else:
                variants["mkernel.gemm_rs (W=1)"] = lambda i: mkernel.gemm_rs(a[i], w[i], comm, out=out)
                variants["mkernel.gemm_ar (W=1)"] = lambda i: mkernel.gemm_ar(a[i], w[i], comm, out=out)
            names = list(variants)
            ref = None
            for name in names:  # every variant's output checked against cuBLAS once
                out.fill_(float("nan"))
                variants[name](0)
                torch.cuda.synchronize()
                if ref is None:
                    ref = out.float().clone()
                else:
                    err = (out.float() - ref).norm() / ref.norm()
                    if not torch.isfinite(err) or err > 1e-2:
                        raise SystemExit(f"{kind} M={m}: {name} differs from cuBLAS (relative {err:.3g})")
            med = dist_timing.measure(variants, list(range(copies)), ROUNDS, WARMUP, LEAD_CYCLES)
            base = med[names[0]]
            for name in names:
                rows.append((kind, m, n, k, name, med[name], base / med[name]))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    lines = [
        f"# The TP ops' GEMM machinery on one GPU (W = 1) vs cuBLAS ({stamp})",
        "",
        f"- command: `MK_TP_SINGLE_RANK={os.environ['MK_TP_SINGLE_RANK']} torchrun --standalone --nproc_per_node=1 "
        f"bench/tp_engine_1gpu.py --ms {args.ms}`",
        f"- GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; commit {dist_timing.provenance()}",
        f"- {ROUNDS} rounds after {WARMUP}, calls interleaved (rotating order), host sync + GPU sleep of {LEAD_CYCLES}"
        " cycles before each (bench/dist_timing.py), CUDA events, medians; inputs rotate through >= 4x L2; random"
        " bf16; outputs checked against cuBLAS (relative < 1e-2)",
        "",
        "| op shape | M | N | K | variant | ms | cuBLAS / variant |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, m, n, k, name, ms, x in rows:
        lines.append(f"| {kind} | {m} | {n} | {k} | {name} | {ms:.3f} | {x:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"tp-engine-1gpu-{stamp}.md"), "w") as f:
        f.write(text)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
