"""A tensor-parallel MLP block with mkernel's fused ops, trained one step and
checked against a single-GPU reference:

    torchrun --nproc_per_node=2 examples/tp_mlp.py

Sequence-parallel activations x [M / W, H] in; column-parallel up projection
(AllGather + GEMM: gathered x @ W1_r^T -> [M, F / W]), GELU, row-parallel
down projection (GEMM + ReduceScatter -> [M / W, H]): each rank ends with
its own rows of x @ W1^T -> gelu -> @ W2^T, no separate collective. The ops
are torch custom ops with autograd, so backward() runs the mirrored
collectives (the gradient of a GEMM+ReduceScatter is an AllGather+GEMM and
back), and an SGD step updates each rank's weight shards.
"""
import os
import sys

import torch
import torch.nn.functional as F

try:
    import mkernel
except ModuleNotFoundError as e:  # in-tree without `pip install .`: the package beside this folder
    if e.name != "mkernel":  # (an installed package missing a part of its own: say so)
        raise
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import mkernel
import mkernel.torchrun


def rel(x, ref):
    return ((x.detach().float() - ref).norm() / ref.norm()).item()


def run(comm, rank, world):
    M, H, FF = 2048, 1024, 4096  # tokens, hidden, FFN width
    lr = 1e-4  # moves the weights by ~10%
    torch.manual_seed(0)  # same full weights, input and output gradient on every rank
    x_full = torch.randn(M, H).bfloat16().cuda()
    w1 = (torch.randn(FF, H) / H ** 0.5).bfloat16().cuda()   # nn.Linear(H, FF).weight
    w2 = (torch.randn(H, FF) / FF ** 0.5).bfloat16().cuda()  # nn.Linear(FF, H).weight
    dy_full = torch.randn(M, H).cuda()  # the loss is sum(y * dy)
    rows = slice(rank * M // world, (rank + 1) * M // world)   # this rank's tokens
    cols = slice(rank * FF // world, (rank + 1) * FF // world)  # this rank's FFN columns
    x = x_full[rows].clone().requires_grad_()
    w1_r = torch.nn.Parameter(w1[cols].clone(memory_format=torch.contiguous_format))     # column shard
    w2_r = torch.nn.Parameter(w2[:, cols].clone(memory_format=torch.contiguous_format))  # row shard
    opt = torch.optim.SGD([w1_r, w2_r], lr=lr)

    def block(x):
        h = mkernel.ag_gemm(x, w1_r, comm)               # [M, FF / W]
        h = F.gelu(h.float()).bfloat16()
        return mkernel.gemm_rs(h, w2_r, comm)            # [M / W, H]

    y = block(x)
    (y.float() * dy_full[rows]).sum().backward()
    opt.step()
    with torch.no_grad():
        y_next = block(x)

    # Single GPU, fp32 (h rounded to bf16 as above), the same step.
    xr, w1f, w2f = (t.float().requires_grad_() for t in (x_full, w1, w2))
    yr = F.gelu(xr @ w1f.t()).bfloat16().float() @ w2f.t()
    (yr * dy_full).sum().backward()
    with torch.no_grad():
        w1n, w2n = w1f - lr * w1f.grad, w2f - lr * w2f.grad
        yr_next = F.gelu(xr @ w1n.t()).bfloat16().float() @ w2n.t()

    errs = {"y": rel(y, yr[rows]), "grad x": rel(x.grad, xr.grad[rows]),
            "grad w1": rel(w1_r.grad, w1f.grad[cols]), "grad w2": rel(w2_r.grad, w2f.grad[:, cols]),
            "y after the step": rel(y_next, yr_next[rows])}
    print(f"rank {rank}: TP MLP block, relative error vs single GPU: "
          + ", ".join(f"{k} {v:.2e}" for k, v in errs.items()), flush=True)
    bad = [k for k, v in errs.items() if not v < 2e-2]
    if bad:
        raise SystemExit(f"rank {rank}: mismatch in {', '.join(bad)}")


if __name__ == "__main__":
    mkernel.torchrun.main(run)
