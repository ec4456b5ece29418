"""Probe (2026-12-03): GemmAr / RingAttention across 2 emulated nodes with both ranks on one GPU under MPS,
with the plan's grid at a given number of CTAs, to see whether the emu stop under MPS
(bench/results/gemm-ar-role-order-20261203.md) depends on how many SMs the grid leaves free.

    MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 torchrun --standalone --nproc_per_node=2 tools/wip/mps_emu_probe.py \
        ar|ring CTAS CALLS
"""
import sys
import time

import torch

import mkernel
import mkernel.torchrun


def run(comm, rank, world):
    what, ctas, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    s = torch.cuda.Stream()  # a side stream (the emu proxy's hazard on the legacy stream: README, Network)
    with torch.cuda.stream(s):
        if what == "ar":
            m, n, k = 2048, 1024, 1024
            plan = mkernel.GemmAr(comm, m, n, k, num_ctas=ctas)
            a = torch.randn(m, k, device="cuda").bfloat16()
            b = torch.randn(n, k, device="cuda").bfloat16()
            call = lambda: plan.run(a, b)  # noqa: E731
        else:
            plan = mkernel.RingAttention(comm, 2, 1000, 8, 2, 128, True, num_ctas=ctas)
            q = torch.randn(2, 1000, 8, 128, device="cuda").bfloat16()
            k, v = (torch.randn(2, 1000, 2, 128, device="cuda").bfloat16() for _ in range(2))
            call = lambda: plan.run(q, k, v)  # noqa: E731
        t0 = time.time()
        for i in range(calls):
            call()
            s.synchronize()
    print(f"rank {rank}: {what} ctas={ctas or 'default'}: {calls} calls done in {time.time() - t0:.1f} s", flush=True)
    plan.close()


if __name__ == "__main__":
    mkernel.torchrun.main(run)
