"""Probe for an open question about the emu transport (2 ranks as 2 emulated nodes):

    MK_RANKS_PER_NODE=1 MK_TIMEOUT_MS=5000 torchrun --standalone --nproc_per_node=2 \
        tools/emu_pageable_probe.py {sync,pinned,pageable}
    (on one GPU add MK_SHARE_GPUS=1; PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so in a checkout)

Does reading an op's result into pageable host memory right after the call (`out.cpu()`, no
synchronize first) block the emu proxy's copy call, so that the op's kernel, which waits for that
copy, times out? tests/python/gpu/dist_tp_check.py does exactly that and fails on emulated nodes at
its first ag_gemm (the proxy's copy call blocked ~60 s: bench/results/multi-gpu-share1gpu-20261201.md),
while dist_ring_attn_check.py, which synchronizes before its host copies, passes there. Each mode
makes three ag_gemm calls and prints how long each took to reach the host:
  sync      torch.cuda.synchronize(), then .cpu()
  pinned    copy_ into a pinned tensor (non_blocking), then torch.cuda.synchronize()
  pageable  .cpu() at once
Expected if the suspicion holds: sync and pinned pass in milliseconds, pageable fails after
MK_TIMEOUT_MS with the proxy's "blocked ... in the CUDA runtime" warning.
Result (one H200, 2 ranks sharing it, 2026-12-01 17:05): exactly that; `mkbench api_block` then showed
why (bench/results/emu-pageable-20261201.md).
"""
import sys
import time

import torch

import mkernel
import mkernel.torchrun


def run(comm, rank, world):
    mode = sys.argv[1] if len(sys.argv) > 1 else "pageable"
    if mode not in ("sync", "pinned", "pageable"):
        raise SystemExit(f"emu_pageable_probe.py: mode must be sync, pinned or pageable (got {mode!r})")
    x = torch.randn(256, 512, device="cuda").bfloat16()
    w = torch.randn(512, 512, device="cuda").bfloat16()
    mkernel.ag_gemm(x, w, comm)
    torch.cuda.synchronize()  # the plan made, every kernel loaded
    pinned = torch.empty(world * 256, 512, dtype=torch.bfloat16).pin_memory()
    for i in range(3):
        t0 = time.time()
        out = mkernel.ag_gemm(x, w, comm)
        if mode == "sync":
            torch.cuda.synchronize()
            h = out.cpu()
        elif mode == "pageable":
            h = out.cpu()
        else:
            pinned.copy_(out, non_blocking=True)
            torch.cuda.synchronize()
            h = pinned
        print(f"rank {rank} mode {mode} call {i}: {time.time() - t0:.3f} s, sum {float(h.float().sum()):.1f}",
              flush=True)


if __name__ == "__main__":
    mkernel.torchrun.main(run)
