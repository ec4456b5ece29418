"""Host cost of one steady-state op call from Python, against the C ABI called
directly (ctypes, no torch) and torch's dispatcher path (torch.ops), on a
GEMM small enough that the GPU keeps up with the host.

    PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so python3 bench/python_overhead.py [--out DIR]

Each figure: median over 21 rounds of (host wall time of 200 back-to-back
calls) / 200, fewer calls than the launch queue holds so the host never
waits for the GPU. Target (issue [python]): mkernel.gemm under 10 us per call.
The C++ figure for the same call is mkbench gemm's "host cost per call" row.
"""
import argparse
import datetime
import os
import statistics
import time

import torch

import mkernel

CALLS, ROUNDS = 200, 21


def per_call_us(fn):
    fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        rounds.append((time.perf_counter() - t0) / CALLS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(rounds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args()
    a = torch.randn(64, 64, device="cuda").bfloat16()
    b = torch.randn(64, 64, device="cuda").bfloat16()
    out = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.current_stream().cuda_stream
    pa, pb, po = a.data_ptr(), b.data_ptr(), out.data_ptr()
    rows = [
        ("mkernel.gemm(a, b, out=out)  (eager, validated)", per_call_us(lambda: mkernel.gemm(a, b, out=out))),
        ("mkernel.gemm(a, b)  (allocates out)", per_call_us(lambda: mkernel.gemm(a, b))),
        ("torch.ops.mkernel.gemm_out  (dispatcher, as torch.compile calls it)",
         per_call_us(lambda: torch.ops.mkernel.gemm_out(a, b, out))),
        ("mkernel.gemm_ptr  (C ABI via ctypes, no checks)",
         per_call_us(lambda: mkernel.gemm_ptr(pa, pb, po, 64, 64, 64, 0, 0, stream))),
        ("torch.matmul(a, b.t(), out=out)  (reference: a torch op)", per_call_us(lambda: torch.matmul(a, b.t(), out=out))),
    ]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    lines = [f"# Python-call overhead ({stamp}, {torch.cuda.get_device_name()}, torch {torch.__version__})", "",
             "- command: `python3 bench/python_overhead.py`", "",
             "| call | host us per call |", "|---|---|"]
    lines += [f"| {name} | {us:.2f} |" for name, us in rows]
    lines += ["", f"Median over {ROUNDS} rounds of {CALLS} back-to-back calls, GEMM 64x64x64 bf16 (the GPU keeps up; "
              "no host waits). Target: mkernel.gemm under 10 us per call."]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"python-overhead-{stamp}.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
