"""The tensor-parallel ops from Python on 2 GPUs (device machine):

    torchrun --nproc_per_node=2 tests/python/gpu/dist_tp_check.py

ag_gemm / gemm_rs (cached plans) and the explicit plans' all_gather /
reduce_scatter against torch references in fp32 (gathered and reduced with
torch.distributed on the CPU), a CUDA-graph capture of ag_gemm replayed with
new inputs, and bad input raising MkernelError. Exits non-zero on any
mismatch."""
import torch
import torch.distributed as dist

import mkernel
import mkernel.torchrun


def rel(x, y):
    return ((x.float().cpu() - y).norm() / y.norm()).item()


def run(comm, rank, world):
    g = torch.Generator(device="cuda").manual_seed(100 + rank)

    def rnd(*shape):
        return (torch.rand(*shape, device="cuda", generator=g) - 0.5).bfloat16()

    def gather_cpu(t):
        parts = [torch.empty_like(t.cpu()) for _ in range(world)]
        dist.all_gather(parts, t.cpu())
        return parts

    # AllGather + GEMM: allgather(x) @ w^T.
    m_local, n, k = 384, 320, 512
    x, w = rnd(m_local, k), rnd(n, k)
    out = mkernel.ag_gemm(x, w, comm)
    full = torch.cat(gather_cpu(x)).float()
    assert rel(out, full @ w.float().cpu().t()) < 1e-2, "ag_gemm"

    # GEMM + ReduceScatter: this rank's rows of sum_ranks h @ v^T.
    m, n2, k2 = 512, 256, 384
    h, v = rnd(m, k2), rnd(n2, k2)
    y = mkernel.gemm_rs(h, v, comm)
    partial = (h.float() @ v.float().t()).cpu()
    total = partial.clone()
    dist.all_reduce(total)
    rows = m // world
    assert rel(y, total[rank * rows:(rank + 1) * rows]) < 1e-2, "gemm_rs"

    # Explicit plans: the collectives alone.
    ag = mkernel.AgGemm(comm, m_local, n, k)
    assert torch.equal(ag.all_gather(x).cpu(), torch.cat(gather_cpu(x))), "all_gather"
    rs = mkernel.GemmRs(comm, m, n2, k2)
    xs = rnd(m, n2)
    red = xs.float().cpu()
    dist.all_reduce(red)
    assert rel(rs.reduce_scatter(xs), red[rank * rows:(rank + 1) * rows]) < 1e-2, "reduce_scatter"

    # CUDA graph: one captured ag_gemm, replayed with new inputs.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        mkernel.ag_gemm(x, w, comm, out=out)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.ag_gemm(x, w, comm, out=out)
    for _ in range(3):
        x.copy_(rnd(m_local, k))
        graph.replay()
        torch.cuda.synchronize()
        full = torch.cat(gather_cpu(x)).float()
        assert rel(out, full @ w.float().cpu().t()) < 1e-2, "graph replay"

    # Bad input: a clear error, nothing launched.
    try:
        mkernel.ag_gemm(x.float(), w, comm)
        raise AssertionError("float input accepted")
    except mkernel.MkernelError as e:
        assert "bfloat16" in str(e), str(e)

    torch.cuda.synchronize()
    dist.barrier()
    for p in (ag, rs):
        p.close()
    print(f"rank {rank}: tensor-parallel ops OK")


if __name__ == "__main__":
    mkernel.torchrun.main(run)
