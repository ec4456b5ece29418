"""Ring attention from Python on 2 GPUs (device machine; also on one rank), 1x2 (NVLink) or, with
MK_RANKS_PER_NODE=1, 2x1 emulated nodes (or 2x2 on 2 GPUs: --nproc_per_node=4 with
MK_RANKS_PER_NODE=2 MK_SHARE_GPUS=1, a shorter run):

    PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so \\
        torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py

mkernel.ring_attention against torch in fp32 on the full, unsharded sequence
(every rank computes the reference; inputs are made from one seed on every
rank, then sharded: zigzag for causal): causal and not, head_dim 64 and 128,
GQA, sequence lengths that are not multiples of the 128-token tiles, batch > 1;
poisoned outputs, every element checked (relative error < 1e-2 on out,
< 1e-3 on lse), repeated calls with fresh data, a CUDA-graph replay, torch.compile, and bad
input raising MkernelError. Exits non-zero on any mismatch."""
import math
import time

import torch

import mkernel
import mkernel.torchrun
import mkernel.tp
from mkernel._lib import knob_bool


def reference(q, k, v, causal):
    b, s, h, d = q.shape
    hkv = k.shape[2]
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(h // hkv, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(h // hkv, dim=1)
    sc = (qf @ kf.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        i = torch.arange(s, device=q.device)
        sc = sc.masked_fill(i[None, :] > i[:, None], float("-inf"))
    return (torch.softmax(sc, -1) @ vf).transpose(1, 2), torch.logsumexp(sc, -1)


def shard(x, rank, world, causal, dim=1):
    if causal:
        return mkernel.zigzag_shard(x, rank, world, seq_dim=dim).contiguous()
    return x.chunk(world, dim=dim)[rank].contiguous()


def check_case(comm, rank, world, b, s_local, h, hkv, d, causal, seed, calls=2):
    s = s_local * world
    for call in range(calls):
        g = torch.Generator(device="cuda").manual_seed(seed * 100 + call)  # the same on every rank
        q = torch.randn(b, s, h, d, device="cuda", generator=g).bfloat16()
        k = torch.randn(b, s, hkv, d, device="cuda", generator=g).bfloat16()
        v = torch.randn(b, s, hkv, d, device="cuda", generator=g).bfloat16()
        ro, rl = reference(q, k, v, causal)
        ql, kl, vl = (shard(t, rank, world, causal) for t in (q, k, v))
        out = torch.full_like(ql, float("nan"))
        lse = torch.full((b, h, s_local), float("nan"), device="cuda")
        mkernel.ring_attention(ql, kl, vl, comm, causal=causal, out=out, lse=lse)
        torch.cuda.synchronize()
        ro_l, rl_l = shard(ro, rank, world, causal), shard(rl, rank, world, causal, dim=2)
        what = f"rank {rank} b={b} s_local={s_local} h={h} hkv={hkv} d={d} causal={causal} call {call}"
        assert torch.isfinite(out.float()).all(), f"{what}: unwritten or non-finite out"
        err = ((out.float() - ro_l).norm() / ro_l.norm()).item()
        lerr = ((lse - rl_l).abs() / rl_l.abs().clamp_min(1.0)).max().item()
        assert err < 1e-2, f"{what}: relative error of out {err:.2e}"
        assert lerr < 1e-3, f"{what}: relative error of lse {lerr:.2e}"
        if call == 0 and rank == 0:
            print(f"ok {what}: out {err:.1e} lse {lerr:.1e}", flush=True)


def short_run(world):
    """Ranks time-slicing shared GPUs (MK_SHARE_GPUS=1, e.g. 2 nodes x 2 GPUs on 2): fewer cases, one call each,
    no torch.compile. Ranks on GPUs of their own (4 or 8 GPUs) run everything."""
    return world > 2 and knob_bool("MK_SHARE_GPUS")  # (the library's spellings: 1, true, on, ...)


def run(comm, rank, world):
    # The GQA case's whole sequence stays at 4096 tokens at most: its fp32 reference holds b x h x S x S scores
    # (34 GB at S = 16k, 8 ranks of 2048).
    big = 2048 if world <= 2 else (4096 // world) & ~1  # (even: a causal zigzag shard)
    cases = [  # b, s_local, h, hkv, d, causal
        (1, 512, 4, 4, 128, False), (1, 512, 4, 4, 128, True), (2, 1000, 8, 2, 128, True),
        (1, 777 * 2, 4, 1, 64, True), (3, 300, 2, 2, 64, False), (1, big, 32, 8, 128, True),
        (1, 130, 2, 2, 128, False),
    ]
    if short_run(world):
        cases = [cases[0], cases[1], cases[2], cases[6]]
    for i, c in enumerate(cases):
        check_case(comm, rank, world, *c, seed=i + 1, calls=1 if short_run(world) else 2)
    if world == 1:  # one rank reads only its own K/V: its plan holds no gathered buffer (K and V: 256 MB here)
        torch.cuda.synchronize()
        free0 = torch.cuda.mem_get_info()[0]
        plan = mkernel.RingAttention(comm, 1, 65536, 8, 8, 128, causal=True)
        torch.cuda.synchronize()
        held = free0 - torch.cuda.mem_get_info()[0]
        assert held < 16 << 20, f"a one-rank ring attention plan holds {held} bytes of device memory"
        del plan
        print(f"ok one rank: the plan holds {held} bytes (no gathered K/V)", flush=True)
    # CUDA-graph replay with new inputs (plan made before capture).
    b, s_local, h, hkv, d = 1, 1024, 8, 4, 128
    ql = torch.randn(b, s_local, h, d, device="cuda").bfloat16()
    kl = torch.randn(b, s_local, hkv, d, device="cuda").bfloat16()
    vl = torch.randn(b, s_local, hkv, d, device="cuda").bfloat16()
    out = torch.empty_like(ql)
    lse = torch.empty(b, h, s_local, device="cuda")
    mkernel.ring_attention(ql, kl, vl, comm, causal=True, out=out, lse=lse)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mkernel.ring_attention(ql, kl, vl, comm, causal=True, out=out, lse=lse)
    captured = [key for key, p in mkernel.tp._PLANS.items()
                if key[0] == "RingAttention" and key[1] == comm._uid and p.captured]
    assert len(captured) == 1, f"rank {rank}: {len(captured)} ring attention plans say they were captured, not 1"
    assert mkernel.tp._PLANS[captured[0]].graphs_alive, f"rank {rank}: the captured plan's graphs_alive is false"
    for rep in range(3):
        g = torch.Generator(device="cuda").manual_seed(1000 + rep)
        q = torch.randn(b, s_local * world, h, d, device="cuda", generator=g).bfloat16()
        k = torch.randn(b, s_local * world, hkv, d, device="cuda", generator=g).bfloat16()
        v = torch.randn(b, s_local * world, hkv, d, device="cuda", generator=g).bfloat16()
        for dst, src in ((ql, q), (kl, k), (vl, v)):
            dst.copy_(shard(src, rank, world, True))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ro, rl = reference(q, k, v, True)
        ro_l = shard(ro, rank, world, True)
        err = ((out.float() - ro_l).norm() / ro_l.norm()).item()
        assert err < 1e-2, f"rank {rank} graph replay {rep}: relative error {err:.2e}"
    # Once the graph is gone (torch destroys it with the object), the plan reads as captured but held by none.
    plan = mkernel.tp._PLANS[captured[0]]
    del graph
    torch.cuda.synchronize()
    end = time.monotonic() + 5
    while plan.graphs_alive and time.monotonic() < end:
        time.sleep(0.001)
    assert plan.captured and not plan.graphs_alive, \
        f"rank {rank}: captured {plan.captured}, graphs_alive {plan.graphs_alive} 5 s after the graph was deleted"
    if rank == 0:
        print("ok graph replay", flush=True)
    # torch.compile(fullgraph=True) traces the custom op (fake implementation) and matches eager.
    f = None if short_run(world) else torch.compile(
        lambda q, k, v: mkernel.ring_attention(q, k, v, comm, causal=True)[0] * 2, fullgraph=True)
    if f is not None:
        eager = mkernel.ring_attention(ql, kl, vl, comm, causal=True)[0]
        compiled = f(ql, kl, vl)
        torch.cuda.synchronize()
        assert torch.equal(compiled, eager * 2), f"rank {rank}: torch.compile result differs from eager"
        if rank == 0:
            print("ok torch.compile", flush=True)
    # Network bytes: what this rank's host proxy took during one call equals the formula (each K/V
    # shard crosses the network once per other node: B x Hkv x 2 x S_local x D x 2 B x (nodes - 1)).
    nodes = comm.info()["num_nodes"]
    torch.cuda.synchronize()
    comm.barrier()
    before = comm.network_bytes_put()
    mkernel.ring_attention(ql, kl, vl, comm, causal=True, out=out, lse=lse)
    torch.cuda.synchronize()
    comm.barrier()  # every peer finished: it received all this rank put, so the proxy took it all
    got, want = comm.network_bytes_put() - before, b * hkv * 2 * s_local * d * 2 * (nodes - 1)
    assert got == want, f"rank {rank}: one ring attention call put {got} network bytes, the formula {want}"
    if rank == 0:
        print(f"ok network bytes per call ({got} on {nodes} node(s))", flush=True)
    # Bad input: every rank raises before anything runs.
    try:
        mkernel.ring_attention(ql.float(), kl, vl, comm, causal=True)
    except mkernel.MkernelError as e:
        assert "bfloat16" in str(e), str(e)
    else:
        raise AssertionError("a float32 q was accepted")
    try:
        mkernel.ring_attention(ql[:, :1023].contiguous(), kl[:, :1023].contiguous(), vl[:, :1023].contiguous(), comm,
                               causal=True)
    except mkernel.MkernelError as e:
        assert "even" in str(e), str(e)
    else:
        raise AssertionError("an odd causal s_local was accepted")
    half = kl.shape[1] // 2  # K/V of other positions than q's (the one-GPU op allows it, the ring op does not)
    kh, vh = kl[:, :half].contiguous(), vl[:, :half].contiguous()
    bads = [lambda: mkernel.ring_attention(ql, kh, vh, comm)]
    if not short_run(world):  # (as above: no torch.compile on time-sliced GPUs)
        bads.append(lambda: torch.compile(lambda q, k, v: mkernel.ring_attention(q, k, v, comm)[0],
                                          fullgraph=True)(ql, kh, vh))
    for bad in bads:
        try:
            bad()
        except Exception as e:  # torch.compile wraps the fake implementation's MkernelError
            assert "same positions" in str(e), str(e)
        else:
            raise AssertionError("k and v shorter than q were accepted")
    if world > 1:
        # K/V of other positions than q's on rank 1 alone, on a shape's first call (scale 0.5: a plan not made
        # yet): rank 1 takes part in the plan check with s_local -1 (session 56), so the others fail at once naming
        # rank 1 instead of waiting for it until the bootstrap bound (60 s), and rank 1 says what it refused.
        kx, vx = (kh, vh) if rank == 1 else (kl, vl)
        t0 = time.monotonic()
        try:
            mkernel.ring_attention(ql, kx, vx, comm, scale=0.5)
        except mkernel.MkernelError as e:
            assert ("same positions" if rank == 1 else "rank 1") in str(e), str(e)
        else:
            raise AssertionError("k and v shorter than q on rank 1 were accepted")
        took = time.monotonic() - t0
        assert took < 10, f"k and v shorter than q on rank 1 alone took {took:.1f} s to fail"
        mkernel.ring_attention(ql, kl, vl, comm, scale=0.5)  # (every rank usable after it)
    if rank == 0:
        print("ok ring attention", flush=True)


if __name__ == "__main__":
    mkernel.torchrun.main(run)
