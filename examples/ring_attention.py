"""A sequence-parallel (context-parallel) causal self-attention block with
mkernel's ring attention, checked against a single-GPU reference:

    torchrun --nproc_per_node=2 examples/ring_attention.py

The sequence is sharded the zigzag way (rank r holds chunks r and 2W-1-r of
2W, mkernel.zigzag_shard), so under a causal mask every rank does the same
work. Each rank projects its own tokens to Q, K, V (GQA: 8 query heads per
2 KV heads), mkernel.ring_attention attends them over the whole sequence in
one persistent kernel (K/V of the other ranks arrive head by head while it
computes), and the output projection follows. The full sequence is put back
with mkernel.zigzag_unshard and compared with the same block computed on one
GPU in fp32.
"""
import os
import sys

import torch
import torch.distributed as dist

try:
    import mkernel
except ModuleNotFoundError as e:  # in-tree without `pip install .`: the package beside this folder
    if e.name != "mkernel":  # (an installed package missing a part of its own: say so)
        raise
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import mkernel
import mkernel.torchrun


def block(x, wq, wk, wv, wo, heads, kv_heads, attend):
    b, s, hidden = x.shape
    d = hidden // heads
    q = (x @ wq.t()).view(b, s, heads, d)
    k = (x @ wk.t()).view(b, s, kv_heads, d)
    v = (x @ wv.t()).view(b, s, kv_heads, d)
    o = attend(q.contiguous(), k.contiguous(), v.contiguous())
    return o.reshape(b, s, heads * d) @ wo.t()


def reference_attention(q, k, v):
    h, hkv = q.shape[2], k.shape[2]
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
    kf, vf = kf.repeat_interleave(h // hkv, 1), vf.repeat_interleave(h // hkv, 1)
    o = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=True)
    return o.transpose(1, 2)


def run(comm, rank, world):
    B, S, HIDDEN, HEADS, KV_HEADS = 2, 4096, 1024, 8, 2  # S: the whole sequence
    torch.manual_seed(0)  # the same input and weights on every rank
    x_full = torch.randn(B, S, HIDDEN).bfloat16().cuda()
    d = HIDDEN // HEADS
    wq = (torch.randn(HIDDEN, HIDDEN) / HIDDEN ** 0.5).bfloat16().cuda()
    wk = (torch.randn(KV_HEADS * d, HIDDEN) / HIDDEN ** 0.5).bfloat16().cuda()
    wv = (torch.randn(KV_HEADS * d, HIDDEN) / HIDDEN ** 0.5).bfloat16().cuda()
    wo = (torch.randn(HIDDEN, HIDDEN) / HIDDEN ** 0.5).bfloat16().cuda()

    x = mkernel.zigzag_shard(x_full, rank, world).contiguous()  # this rank's tokens
    y = block(x, wq, wk, wv, wo, HEADS, KV_HEADS,
              lambda q, k, v: mkernel.ring_attention(q, k, v, comm, causal=True)[0])

    y_cpu = y.float().cpu()  # gathered over gloo (mkernel.torchrun's default group), on the CPU
    shards = [torch.empty_like(y_cpu) for _ in range(world)]
    dist.all_gather(shards, y_cpu)
    y_full = mkernel.zigzag_unshard(shards).cuda()
    ref = block(x_full.float(), wq.float(), wk.float(), wv.float(), wo.float(), HEADS, KV_HEADS,
                reference_attention)
    err = ((y_full.float() - ref).norm() / ref.norm()).item()
    if rank == 0:
        print(f"ring-attention block, {world} ranks, B={B} S={S} heads {HEADS}/{KV_HEADS}: "
              f"relative error vs one GPU (fp32) {err:.2e}", flush=True)
    assert err < 2e-2, f"rank {rank}: relative error {err:.2e}"


if __name__ == "__main__":
    mkernel.torchrun.main(run)
