"""Timeline of one ring-attention call from its device event log (RingAttention.enable_trace), for
diagnosing where a call's time goes (device machine, torchrun):

    torchrun --standalone --nproc_per_node=2 tools/ring_trace.py [--batch 1 --seq 2048 --kv-heads 32 --causal]
    MK_RANKS_PER_NODE=1 torchrun ...   # 2 emulated nodes

Prints per rank, in microseconds from the earliest CTA start of any rank (the GPUs' globaltimers: on one
host both follow the host clock, to about a microsecond):
  - the kernel span (first CTA start, last CTA end of computing: the engine's first consumer warpgroup);
  - per chunk (batch, KV head) of this rank: when its last piece was pushed, when InterSend saw it in
    its own slot and posted its network put (several nodes), and the median / longest post;
  - per chunk waited for: the first wait begin and last wait end over the CTAs, and the summed wait;
  - the CTAs' total waiting and the longest single wait.
The last of --calls calls is traced (the earlier ones warm up).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import mkernel  # noqa: E402
import mkernel.torchrun  # noqa: E402
from mkernel._ring_attention import TRACE_KINDS  # noqa: E402


def summarize(rank, events, t0, chunks):
    """Lines describing one rank's events (cta, kind, arg, t_ns); t0: the common origin (ns)."""
    us = lambda t: (t - t0) / 1e3  # noqa: E731
    by = {}
    for cta, kind, arg, t in events:
        by.setdefault(TRACE_KINDS.get(kind, str(kind)), []).append((cta, arg, t))
    lines = [f"rank {rank}: {len(events)} events"]
    if "cta_start" in by and "cta_end" in by:
        lines.append(f"  kernel: first CTA start {us(min(t for _, _, t in by['cta_start'])):.1f} us, last CTA done "
                     f"{us(max(t for _, _, t in by['cta_end'])):.1f} us ({len(by['cta_end'])} CTAs)")
    pushed = {}
    for _, arg, t in by.get("push_done", []):
        c = arg >> 8
        pushed[c] = max(pushed.get(c, 0), t)
    own = {arg: t for _, arg, t in by.get("own_ready", [])}
    put = {arg: t for _, arg, t in by.get("put_posted", [])}
    if pushed or put:
        lines.append("  own chunks: chunk | last piece pushed | own slot seen (InterSend) | put posted")
        for c in sorted(set(pushed) | set(put))[:chunks]:
            cell = lambda d: f"{us(d[c]):.1f}" if c in d else "-"  # noqa: E731
            lines.append(f"    {c} | {cell(pushed)} | {cell(own)} | {cell(put)}")
    posts = sorted(put[c] - own[c] for c in put if c in own)
    if posts:
        lines.append(f"  InterSend command posts (own slot seen -> put posted): median {posts[len(posts) // 2] / 1e3:.1f} us, "
                     f"max {posts[-1] / 1e3:.1f} us over {len(posts)} puts")
    # The stages of each post (net::CmdStep): claim the slot, find it free, issue the body's stores to host
    # memory, publish the header with a system-scope release (put_posted; the body's PCIe writes show
    # here). Keyed by chunk: with more than 2 nodes a chunk has one put per rail peer and the stages are
    # those of its last put ("claim" then includes the earlier puts).
    stages = [("own_ready", "put_claimed", "claim"), ("put_claimed", "put_room", "room"),
              ("put_room", "put_body", "body"), ("put_body", "put_posted", "release")]
    parts = []
    for a, b, name in stages:
        ta = {arg: t for _, arg, t in by.get(a, [])}
        tb = {arg: t for _, arg, t in by.get(b, [])}
        d = sorted(tb[c] - ta[c] for c in tb if c in ta)
        if d:
            parts.append(f"{name} median {d[len(d) // 2] / 1e3:.1f} / max {d[-1] / 1e3:.1f}")
    if parts:
        lines.append("  post stages (us): " + ", ".join(parts))
    if "quiet_done" in by:
        lines.append(f"  network queue flushed: {us(by['quiet_done'][0][2]):.1f} us")
    begins = {}
    for cta, arg, t in by.get("wait_begin", []):
        begins.setdefault((cta, arg), []).append(t)
    waits = {}  # signal -> [(begin, end)]
    for cta, arg, t in by.get("wait_end", []):
        b = begins.get((cta, arg), [])
        if b:
            waits.setdefault(arg, []).append((b.pop(0), t))
    if waits:
        base = min(waits)
        lines.append(f"  chunks waited for (signal - {base}): first wait begin | last wait end | summed wait (us) | waits")
        for s in sorted(waits)[:chunks]:
            w = waits[s]
            lines.append(f"    {s - base} | {us(min(b for b, _ in w)):.1f} | {us(max(e for _, e in w)):.1f} | "
                         f"{sum(e - b for b, e in w) / 1e3:.1f} | {len(w)}")
        allw = [e - b for w in waits.values() for b, e in w]
        lines.append(f"  waiting: {sum(allw) / 1e3:.1f} us over {len(allw)} waits, longest {max(allw) / 1e3:.1f} us")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048, help="tokens per rank (S_local)")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--events", type=int, default=4096, help="events kept per CTA")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--ctas", type=int, default=0, help="the plan's CTAs (0: its default)")
    ap.add_argument("--backend", default="gloo", help="torch.distributed backend (nccl: as the benchmarks)")
    ap.add_argument("--lead-cycles", type=int, default=0,
                    help="a GPU sleep of this many cycles before each call (as bench/torch_ring_attn_bench.py)")
    ap.add_argument("--chunks", type=int, default=64, help="at most this many chunk rows printed")
    args = ap.parse_args()
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(k, v)
    # Ranks may share GPUs (MK_SHARE_GPUS: one GPU for every rank).
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group(args.backend)
    comm = mkernel.init()
    with mkernel.torchrun.reported(comm):  # a stopped wait says which (role, block, signal, peer)
        trace(args, comm)


def trace(args, comm):
    rank = comm.rank
    b, s, h, hkv, d = args.batch, args.seq, args.heads, args.kv_heads, args.head_dim
    plan = mkernel.RingAttention(comm, b, s, h, hkv, d, args.causal, num_ctas=args.ctas)
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    for i in range(args.calls):
        if i == args.calls - 1:
            plan.enable_trace(args.events)
        torch.cuda.synchronize()
        dist.barrier()
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if args.lead_cycles:
            torch.cuda._sleep(args.lead_cycles)
        st.record()
        plan.run(q, k, v)
        en.record()
    torch.cuda.synchronize()
    ms = st.elapsed_time(en)
    events = plan.read_trace()
    everything = [None] * comm.world
    dist.all_gather_object(everything, (ms, events))
    if rank == 0:
        starts = [t for _, evs in everything for _, kind, _, t in evs if kind == 1]
        t0 = min(starts) if starts else 0
        print(f"B={b} S_local={s} H={h} Hkv={hkv} D={d} causal={args.causal} world={comm.world} "
              f"MK_RANKS_PER_NODE={os.environ.get('MK_RANKS_PER_NODE')} ctas={args.ctas or 'default'} "
              f"backend={args.backend} lead_cycles={args.lead_cycles}")
        for r, (ms_r, evs) in enumerate(everything):
            print(f"rank {r}: traced call {ms_r * 1e3:.1f} us (CUDA events)")
            print("\n".join(summarize(r, evs, t0, args.chunks)))
    plan.close()
    dist.barrier()


if __name__ == "__main__":
    main()
