"""The two halves of ring attention timed alone, for the overlap efficiency of MEASURING.md (shared/):
eta = T_lb / T_mkernel, T_lb = max(T_compute_alone, T_comm_alone). Used by bench/torch_ring_attn_bench.py,
timed in the same rotation as the baselines.

compute alone (every K and V already on this GPU, in natural token order; the fastest of):
  compute flash / compute cudnn: the all-gather baseline's attention calls without its all-gather
    (torch.ops.aten SDPA; causal: per local chunk a causal call on its own K/V and a non-causal call on
    the earlier chunks, merged in fp32);
  compute mkernel: mkernel.attention, the one-GPU engine (causal: one call per local chunk, against every
    key up to the chunk's end, bottom-right aligned: compute_calls()).
comm alone (the K and V bytes of every rank to every rank, the fastest of):
  comm nccl: one dist.all_gather_into_tensor of this rank's K and V bytes;
  comm mkernel: one mkernel.all_gather of the same bytes ([2 B S_local, Hkv D] rows).
On emulated nodes (MK_RANKS_PER_NODE < world) NCCL's all-gather crosses NVLink, not the emulated
network: it is reported but not a candidate for comm alone there (comm_candidates()).

These variants make their own random inputs at build time (two sets, used in turn) instead of the
rotating pool: they need other layouts (gathered K/V, contiguous query chunks). They are timed, not
checked (their outputs are not the op's).
"""
import torch
import torch.distributed as dist

COMPUTE = ("compute flash", "compute cudnn", "compute mkernel")
COMM = ("comm nccl", "comm mkernel")
ALONE = COMPUTE + COMM  # every variant of this module (timed, not checked)
TORCH_BACKEND = {"compute flash": "flash", "compute cudnn": "cudnn"}  # the SDPA backend each torch one needs


def compute_calls(rank, world, s_local, causal):
    """The one-GPU engine's calls for this rank's queries over the gathered K/V in natural order:
    [(q_lo, q_hi, kv_hi, causal)]: local rows [q_lo, q_hi) against global keys [0, kv_hi), causal
    bottom-right aligned (query i of the call sees keys j <= i + kv_hi - (q_hi - q_lo)). Non-causal: the
    rank's contiguous shard against every key. Causal (zigzag shards, rank r: global chunks r and
    2W-1-r of 2W, S_local / 2 tokens each): one call per local chunk, against every key to its end."""
    if not causal:
        return [(0, s_local, world * s_local, False)]
    c = s_local // 2
    return [(j * c, (j + 1) * c, (g + 1) * c, True) for j, g in enumerate((rank, 2 * world - 1 - rank))]


def comm_candidates(emulated):
    """Which comm-alone variants bound the network part: on emulated nodes only mkernel's (its
    all-gather crosses the emulated network; NCCL's does not)."""
    return ("comm mkernel",) if emulated else COMM


def lower_bound(times, emulated):
    """(T_lb, compute (name, ms), comm (name, ms)) from measured times (name -> ms); None where a half
    was not measured."""
    comp = {n: times[n] for n in COMPUTE if n in times}
    comm = {n: times[n] for n in comm_candidates(emulated) if n in times}
    if not comp or not comm:
        return None, None, None
    c = min(comp, key=comp.get)
    n = min(comm, key=comm.get)
    return max(comp[c], comm[n]), (c, comp[c]), (n, comm[n])


class MkCompute:
    """compute mkernel: mkernel.attention calls (compute_calls), each on contiguous K/V holding exactly its
    keys (a key prefix of the gathered sequence is not one block when B > 1)."""

    def __init__(self, shape, ctx):
        import mkernel
        self.mk = mkernel
        b, s, h, hkv, d = shape.b, shape.s, shape.h, shape.hkv, shape.d
        self.calls = compute_calls(ctx.rank, ctx.world, s, shape.causal)
        dev, bf = torch.device("cuda"), torch.bfloat16
        rnd = lambda *size: torch.randn(*size, device=dev, dtype=bf)  # noqa: E731
        self.sets = [[(rnd(b, hi - lo, h, d), rnd(b, kv_hi, hkv, d), rnd(b, kv_hi, hkv, d))
                      for lo, hi, kv_hi, _ in self.calls] for _ in range(2)]
        self.outs = [(torch.empty(b, hi - lo, h, d, device=dev, dtype=bf), torch.empty(b, h, hi - lo, device=dev))
                     for lo, hi, _, _ in self.calls]
        self.n = 0

    def __call__(self, _):
        qkv = self.sets[self.n % 2]
        self.n += 1
        for (q, k, v), (_, _, _, causal), (o, lse) in zip(qkv, self.calls, self.outs):
            self.mk.attention(q, k, v, causal=causal, out=o, lse=lse)
        return self.outs[0][0]


class CommAlone:
    """comm nccl / comm mkernel: this rank's K and V bytes to every rank, one all-gather."""

    def __init__(self, shape, kind, ctx):
        rows, cols = 2 * shape.b * shape.s, shape.hkv * shape.d
        dev = torch.device("cuda")
        self.kind, self.comm = kind, ctx.comm
        self.src = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16) for _ in range(2)]
        self.dst = torch.empty(ctx.world * rows, cols, device=dev, dtype=torch.bfloat16)
        self.n = 0
        if kind == "mkernel":
            import mkernel
            self.mk = mkernel

    def __call__(self, _):
        src = self.src[self.n % 2]
        self.n += 1
        if self.kind == "nccl":
            dist.all_gather_into_tensor(self.dst, src)
        else:
            self.mk.all_gather(src, self.comm, out=self.dst)
        return self.dst


def eta_variants(compute_builder):
    """name -> build(shape, ctx) -> fn(pool input) for the compute-alone and comm-alone variants.
    compute_builder(backend) builds the torch compute-alone variants (the bench's all-gather baseline
    without its all-gather)."""
    out = {name: compute_builder(backend) for name, backend in TORCH_BACKEND.items()}
    out["compute mkernel"] = lambda shape, ctx: MkCompute(shape, ctx)
    out["comm nccl"] = lambda shape, ctx: CommAlone(shape, "nccl", ctx)
    out["comm mkernel"] = lambda shape, ctx: CommAlone(shape, "mkernel", ctx)
    return out
