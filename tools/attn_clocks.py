"""Sustained back-to-back calls of mkernel.attention and SDPA's cuDNN backend at one long shape (B=1, S=32k,
H=32, Hkv=8, D=128, non-causal), with nvidia-smi sampling SM clock, power and throttle reasons during each
batch of 60 calls (device machine, one GPU):

    PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so python3 tools/attn_clocks.py
"""
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from attention_bench import mkernel, repeated_kv, sdpa, sdpa_takes_gqa  # noqa: E402  (the benchmark's SDPA call)

B, S, H, HKV, D, CALLS = 1, 32768, 32, 8, 128, 60
SMI = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active", "--format=csv,noheader",
       "-lms", "100"]


def batch(name, f):
    """CALLS back-to-back calls of f with nvidia-smi sampling; prints time per call and the middle half of
    the samples' clocks, power and throttle reasons."""
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    mon = subprocess.Popen(SMI, stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(CALLS):
        f()
    e1.record()
    torch.cuda.synchronize()
    mon.terminate()
    samples = [line.split(",") for line in mon.communicate()[0].strip().splitlines()]
    mid = samples[len(samples) // 4: 3 * len(samples) // 4] or samples
    clk = [int(s[0].split()[0]) for s in mid]
    power = [float(s[1].split()[0]) for s in mid]
    reasons = sorted({s[2].strip() for s in mid})
    print(f"{name}: {e0.elapsed_time(e1) / CALLS:.3f} ms/call; SM clock MHz median {statistics.median(clk):.0f} "
          f"(min {min(clk)}, max {max(clk)}); power W median {statistics.median(power):.1f}; reasons {reasons}; "
          f"samples {len(mid)}", flush=True)


def main():
    q = torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, S, HKV, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    cudnn = sdpa(torch.nn.attention.SDPBackend.CUDNN_ATTENTION)
    kvr = None if sdpa_takes_gqa() else repeated_kv([(q, k, v)], H)  # (torch < 2.5: no enable_gqa)
    for name, f in [("mk", lambda: mkernel.attention(q, k, v, causal=False)),
                    ("cudnn", lambda: cudnn(q, k, v, False, kvr)),
                    ("mk", lambda: mkernel.attention(q, k, v, causal=False)),
                    ("cudnn", lambda: cudnn(q, k, v, False, kvr))]:
        batch(name, f)
        time.sleep(2)


if __name__ == "__main__":
    main()
