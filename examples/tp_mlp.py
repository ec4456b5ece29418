"""A tensor-parallel MLP block with mkernel's fused ops, checked against a
single-GPU reference:

    torchrun --nproc_per_node=2 examples/tp_mlp.py

Sequence-parallel activations x [M / W, H] in; column-parallel up projection
(AllGather + GEMM: gathered x @ W1_r^T -> [M, F / W]), GELU, row-parallel
down projection (GEMM + ReduceScatter -> [M / W, H]): each rank ends with
its own rows of x @ W1^T -> gelu -> @ W2^T, no separate collective.
"""
import torch

import mkernel
import mkernel.torchrun


def run(comm, rank, world):
    M, H, F = 2048, 1024, 4096  # tokens, hidden, FFN width
    torch.manual_seed(0)  # same full weights and input on every rank
    x_full = torch.randn(M, H).bfloat16()
    w1 = (torch.randn(F, H) / H ** 0.5).bfloat16()  # nn.Linear(H, F).weight
    w2 = (torch.randn(H, F) / F ** 0.5).bfloat16()  # nn.Linear(F, H).weight
    rows, cols = M // world, F // world
    x = x_full[rank * rows:(rank + 1) * rows].cuda()          # this rank's tokens
    w1_r = w1[rank * cols:(rank + 1) * cols].contiguous().cuda()  # column shard
    w2_r = w2[:, rank * cols:(rank + 1) * cols].contiguous().cuda()  # row shard

    h = mkernel.ag_gemm(x, w1_r, comm)                 # [M, F / W]
    h = torch.nn.functional.gelu(h.float()).bfloat16()
    y = mkernel.gemm_rs(h, w2_r, comm)                 # [M / W, H]

    ref = torch.nn.functional.gelu(x_full.float() @ w1.float().t()).bfloat16().float() @ w2.float().t()
    ref = ref[rank * rows:(rank + 1) * rows]
    err = ((y.float().cpu() - ref).norm() / ref.norm()).item()
    print(f"rank {rank}: TP MLP block, relative error vs single GPU {err:.2e}")
    if err > 2e-2:
        raise SystemExit(f"rank {rank}: mismatch")


if __name__ == "__main__":
    mkernel.torchrun.main(run)
