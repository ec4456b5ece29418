"""Sustained back-to-back calls of mkernel.attention and SDPA's cuDNN backend at one long shape (B=1, S=32k,
H=32, Hkv=8, D=128, non-causal), with nvidia-smi sampling SM clock, power and throttle reasons during each
batch of 60 calls (device machine, one GPU):

    PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so python3 tools/attn_clocks.py
"""
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import mkernel  # noqa: E402

b, s, h, hkv, d = 1, 32768, 32, 8, 128
q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
k, v = (torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))


def mk():
    mkernel.attention(q, k, v, causal=False)


def cu():
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(q.transpose(1,2), k.transpose(1,2), v.transpose(1,2), enable_gqa=True)


for name, f in [("mk", mk), ("cudnn", cu), ("mk", mk), ("cudnn", cu)]:
    for _ in range(3): f()
    torch.cuda.synchronize()
    mon = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active", "--format=csv,noheader", "-lms", "100"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(60): f()
    e1.record(); torch.cuda.synchronize()
    mon.terminate(); out = mon.communicate()[0].strip().splitlines()
    mid = out[len(out)//4: 3*len(out)//4] or out
    clk = sorted(int(l.split(',')[0].split()[0]) for l in mid); pw = sorted(float(l.split(',')[1].split()[0]) for l in mid)
    print(f"{name}: {e0.elapsed_time(e1)/60:.3f} ms/call; SM clock MHz median {clk[len(clk)//2]} (min {clk[0]}, max {clk[-1]}); power W median {pw[len(pw)//2]}; reasons {sorted(set(l.split(',')[3].strip() for l in mid))}; samples {len(mid)}", flush=True)
    time.sleep(2)
