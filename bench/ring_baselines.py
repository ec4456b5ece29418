"""The ring-attention benchmark's torch baselines (bench/torch_ring_attn_bench.py): the SDPA backends as (out, lse)
functions, the log-sum-exp merge, the zigzag ring's step rules and the all-gather's slot layout, and the baseline
classes -- ring-flash-attention style P2P ring, all-gather then attention (NCCL, or mkernel's all-gather on the op's
own transport, plain or overlapped) and the all-gather baseline's compute alone. Each is build(shape, ctx) ->
fn((q, k, v)) -> out (B, S_local, H, D) bf16. Plain torch and torch.distributed; tests/python/test_ring_bench_cpu.py
runs the step rules and the classes' compute on the CPU."""
import torch
import torch.distributed as dist


# ---- attention backends: (B, S, heads, D) in, (out (B, Sq, H, D), lse (B, H, Sq) fp32) out ----

def _flash(q, k, v, causal, scale):  # (B, heads, S, D) views; returns (output, logsumexp, ...)
    return torch.ops.aten._scaled_dot_product_flash_attention(
        q, k, v, dropout_p=0.0, is_causal=causal, return_debug_mask=False, scale=scale)


def _cudnn_lse_args():
    """The cuDNN op's arguments that ask for the logsumexp: attn_bias and compute_log_sumexp since torch 2.5; torch
    2.4's op has neither (it returns one as training does; split_out_lse checks what comes back)."""
    lse_args = {"attn_bias": None, "compute_log_sumexp": True}
    try:
        names = {a.name for a in torch.ops.aten._scaled_dot_product_cudnn_attention.default._schema.arguments}
    except (AttributeError, RuntimeError):  # (no such op, or no schema to read: the current form)
        return lse_args
    return lse_args if "compute_log_sumexp" in names else {}


_CUDNN_LSE_ARGS = _cudnn_lse_args()


def _cudnn(q, k, v, causal, scale):  # logsumexp is (B, H, S, 1) here
    return torch.ops.aten._scaled_dot_product_cudnn_attention(
        q, k, v, **_CUDNN_LSE_ARGS, dropout_p=0.0, is_causal=causal, return_debug_mask=False, scale=scale)


ATEN = {"flash": _flash, "cudnn": _cudnn}


def split_out_lse(res, b, sq, h, d):
    """(out, lse) of an aten SDPA op's result tuple, checked: out (B, H, Sq, D) -> a (B, Sq, H, D) view,
    lse (B, H, Sq) fp32 (a trailing 1 or padding past Sq dropped)."""
    out, lse = res[0], res[1]
    if tuple(out.shape) != (b, h, sq, d):
        raise RuntimeError(f"attention output is {tuple(out.shape)}, expected {(b, h, sq, d)}")
    if lse.dim() == 4 and lse.shape[-1] == 1:
        lse = lse.squeeze(-1)
    if lse.dim() != 3 or tuple(lse.shape[:2]) != (b, h) or lse.shape[2] < sq or lse.dtype != torch.float32:
        raise RuntimeError(f"attention logsumexp is {tuple(lse.shape)} {lse.dtype}, expected {(b, h, sq)} float32")
    return out.transpose(1, 2), lse[..., :sq]


def attention(backend, expand_kv):
    """fn(q, k, v, causal) -> (out, lse) for (B, S, heads, D) tensors (views are fine: unit stride in D).
    is_causal is only ever used with Sq == Skv (where top-left and bottom-right alignment agree).
    expand_kv: GQA K/V repeated to the query heads first (repeat_interleave: query head i uses KV head
    i // (H / Hkv), as in SDPA's enable_gqa)."""
    op = ATEN[backend]

    def fn(q, k, v, causal):
        b, sq, h, d = q.shape
        if expand_kv and k.shape[2] != h:
            k, v = (t.repeat_interleave(h // t.shape[2], dim=2) for t in (k, v))
        res = op(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal, d ** -0.5)
        return split_out_lse(res, b, sq, h, d)
    return fn


def merge_(out, lse, blk_out, blk_lse):
    """In place: out (B, S, H, D) fp32 and lse (B, H, S) fp32, the softmax over some keys, become the
    softmax over those and a block's (blk_out, any float dtype; blk_lse): lse' = logaddexp(lse, blk_lse),
    out' = out + sigmoid(blk_lse - lse) * (blk_out - out) (ring-flash-attention's update; views work)."""
    w = torch.sigmoid(blk_lse - lse).transpose(1, 2).unsqueeze(-1)  # (B, S, H, 1): the block's share
    out.lerp_(blk_out.float(), w)
    torch.logaddexp(lse, blk_lse, out=lse)


def part(t, which, dim=1):
    """'all' of t, or its 'first' / 'second' half along the sequence dimension: a view."""
    half = t.shape[dim] // 2
    return t if which == "all" else t.narrow(dim, 0, half) if which == "first" else t.narrow(dim, half, half)


def ring_step(rank, world, step, causal):
    """Ring step `step` on `rank`: (src, q_part, kv_part, is_causal). The K/V in hand came from rank src;
    attention of q_part of the local queries against kv_part of src's K/V (parts: part()). Zigzag causal
    (ring-flash-attention's scheme): own K/V causal; src < rank: both local chunks follow src's first chunk
    and precede its second; src > rank: only the local second chunk follows both of src's."""
    src = (rank - step) % world
    if not causal:
        return src, "all", "all", False
    if src == rank:
        return src, "all", "all", True
    return (src, "all", "first", False) if src < rank else (src, "second", "all", False)


def allgather_slots(world):
    """Global chunk (of 2*world) held by each slot (S_local / 2 tokens) of the causal allgather's gathered
    K/V: every rank's second half, then every rank's first half, each in rank order. Then the chunks
    before any local chunk are one contiguous run of slots (allgather_prefix)."""
    return [2 * world - 1 - w for w in range(world)] + list(range(world))


def allgather_prefix(rank, world, j):
    """Slots [lo, hi) of the causal gathered K/V holding exactly the chunks before local chunk j
    (j = 0: global chunk rank; j = 1: global chunk 2*world-1-rank)."""
    return (world, world + rank) if j == 0 else (rank + 1, 2 * world)


def rel_err(got, ref):
    return ((got.float() - ref).abs().max() / ref.abs().max()).item()


# ---- the baselines: build(shape, ctx) -> fn((q, k, v)) -> out (B, S_local, H, D) bf16 ----

class Ring:
    """Ring attention, ring-flash-attention style: K/V travel to the next rank (NCCL P2P from a side
    stream) while the current step's attention runs; out and lse accumulate in fp32 across steps."""

    def __init__(self, shape, attn, ctx):
        b, s, h, hkv, d, dev = shape.b, shape.s, shape.h, shape.hkv, shape.d, torch.device("cuda")
        self.shape, self.attn, self.rank, self.world = shape, attn, ctx.rank, ctx.world
        self.recv = [[torch.empty(b, s, hkv, d, device=dev, dtype=torch.bfloat16) for _ in range(2)]
                     for _ in range(min(2, ctx.world - 1))]  # double buffer: [k, v] received at even / odd steps
        nan = float("nan")  # poisoned: a row no step writes shows up in the check
        self.out = torch.full((b, s, h, d), nan, device=dev)
        self.lse = torch.full((b, h, s), nan, device=dev)
        self.final = torch.full((b, s, h, d), nan, device=dev, dtype=torch.bfloat16)
        self.side = torch.cuda.Stream()

    def __call__(self, qkv):
        q, k, v = qkv
        cur, nxt_rank, prv_rank = (k, v), (self.rank + 1) % self.world, (self.rank - 1) % self.world
        compute = torch.cuda.current_stream()
        for step in range(self.world):
            reqs = None
            if step + 1 < self.world:
                nxt = self.recv[step % 2]
                self.side.wait_stream(compute)  # nxt was read by the step before this one
                with torch.cuda.stream(self.side):
                    reqs = dist.batch_isend_irecv([
                        dist.P2POp(dist.isend, cur[0], nxt_rank), dist.P2POp(dist.isend, cur[1], nxt_rank),
                        dist.P2POp(dist.irecv, nxt[0], prv_rank), dist.P2POp(dist.irecv, nxt[1], prv_rank)])
            _, qp, kvp, causal = ring_step(self.rank, self.world, step, self.shape.causal)
            o, lse = self.attn(part(q, qp), part(cur[0], kvp), part(cur[1], kvp), causal)
            if step == 0:  # covers every row
                self.out.copy_(o)
                self.lse.copy_(lse)
            else:
                merge_(part(self.out, qp), part(self.lse, qp, dim=2), o, lse)
            if reqs is not None:
                for r in reqs:
                    r.wait()  # the compute stream waits for the transfer
                cur = nxt
        self.final.copy_(self.out)
        return self.final


class AllGather:
    """all_gather_into_tensor of K and V, then attention on the compute stream (no overlap). Causal: the
    gathered K/V are laid out by allgather_slots, and each local chunk is a causal call against its own
    K/V merged with a non-causal call against the earlier chunks."""

    def __init__(self, shape, attn, ctx):
        b, s, h, hkv, d, dev = shape.b, shape.s, shape.h, shape.hkv, shape.d, torch.device("cuda")
        self.shape, self.attn, self.rank, self.world = shape, attn, ctx.rank, ctx.world
        self.kg, self.vg = (torch.empty(b, ctx.world * s, hkv, d, device=dev, dtype=torch.bfloat16)
                            for _ in range(2))
        if shape.causal:
            nan = float("nan")
            self.out = torch.full((b, s, h, d), nan, device=dev)
            self.lse = torch.full((b, h, s), nan, device=dev)
            self.final = torch.full((b, s, h, d), nan, device=dev, dtype=torch.bfloat16)

    def gather(self, k, v):
        """One collective per batch element and tensor (a rank's block of the gathered sequence must be
        contiguous); causal: two, for the second halves (slots 0..W-1) and first halves (slots W..2W-1)."""
        ws, c = self.world * self.shape.s, self.shape.s // 2
        for src, dst in ((k, self.kg), (v, self.vg)):
            for i in range(self.shape.b):
                if self.shape.causal:
                    dist.all_gather_into_tensor(dst[i, :ws // 2], src[i, c:])
                    dist.all_gather_into_tensor(dst[i, ws // 2:], src[i, :c])
                else:
                    dist.all_gather_into_tensor(dst[i], src[i])

    def __call__(self, qkv):
        q, k, v = qkv
        self.gather(k, v)
        if not self.shape.causal:
            return self.attn(q, self.kg, self.vg, False)[0]
        c = self.shape.s // 2
        for j in range(2):
            rows = slice(j * c, (j + 1) * c)
            o, lse = self.attn(q[:, rows], k[:, rows], v[:, rows], True)  # the chunk against itself
            lo, hi = allgather_prefix(self.rank, self.world, j)
            if lo == hi:  # global chunk 0: nothing before it
                self.final[:, rows] = o
                continue
            out, acc = self.out[:, rows], self.lse[:, :, rows]
            out.copy_(o)
            acc.copy_(lse)
            merge_(out, acc, *self.attn(q[:, rows], self.kg[:, lo * c:hi * c], self.vg[:, lo * c:hi * c], False))
            self.final[:, rows] = out
        return self.final


class AllGatherMk(AllGather):
    """The all-gather baseline with mkernel.all_gather (the standalone collective of the op's own transport:
    NVLink inside a node, the network, emulated or not, between nodes) instead of NCCL's; the same slices."""

    def __init__(self, shape, attn, ctx):
        super().__init__(shape, attn, ctx)
        import mkernel
        self.mk, self.comm = mkernel, ctx.comm

    def gather(self, k, v):
        ws, c, cols = self.world * self.shape.s, self.shape.s // 2, self.shape.hkv * self.shape.d
        for src, dst in ((k, self.kg), (v, self.vg)):
            for i in range(self.shape.b):
                if self.shape.causal:
                    self.mk.all_gather(src[i, c:].reshape(-1, cols), self.comm, out=dst[i, :ws // 2].view(-1, cols))
                    self.mk.all_gather(src[i, :c].reshape(-1, cols), self.comm, out=dst[i, ws // 2:].view(-1, cols))
                else:
                    self.mk.all_gather(src[i].reshape(-1, cols), self.comm, out=dst[i].view(-1, cols))


class AllGatherMkOverlap(AllGatherMk):
    """The all-gather baseline on mkernel's transport with its gather overlapped: mkernel.all_gather of K and V
    on a side stream while the compute stream attends to this rank's own K/V (local_part), then to the other
    ranks' once they are gathered (remote_part), merged in fp32 by log-sum-exp. On emulated nodes the best
    overlapped baseline a user could write on the op's own transport (session 38: the 2x1 candidates had no
    overlap). Causal (zigzag): each local chunk against itself first, then its prefix of earlier chunks."""

    def __init__(self, shape, attn, ctx):
        super().__init__(shape, attn, ctx)
        b, s, h, d, dev = shape.b, shape.s, shape.h, shape.d, torch.device("cuda")
        nan = float("nan")
        self.out = torch.full((b, s, h, d), nan, device=dev)
        self.lse = torch.full((b, h, s), nan, device=dev)
        self.final = torch.full((b, s, h, d), nan, device=dev, dtype=torch.bfloat16)
        self.side = torch.cuda.Stream()

    def local_part(self, q, k, v):
        """Into self.out / self.lse (fp32): this rank's queries against its own K/V (causal: chunk by chunk)."""
        if not self.shape.causal:
            o, lse = self.attn(q, k, v, False)
            self.out.copy_(o)
            self.lse.copy_(lse)
            return
        c = self.shape.s // 2
        for j in range(2):
            rows = slice(j * c, (j + 1) * c)
            o, lse = self.attn(q[:, rows], k[:, rows], v[:, rows], True)
            self.out[:, rows].copy_(o)
            self.lse[:, :, rows].copy_(lse)

    def remote_part(self, q):
        """The other ranks' gathered K/V merged in; returns the bf16 output."""
        s, c, r = self.shape.s, self.shape.s // 2, self.rank
        if not self.shape.causal:
            for lo, hi in ((0, r * s), ((r + 1) * s, self.world * s)):  # the gathered blocks but this rank's
                if lo < hi:
                    merge_(self.out, self.lse, *self.attn(q, self.kg[:, lo:hi], self.vg[:, lo:hi], False))
            self.final.copy_(self.out)
            return self.final
        for j in range(2):
            rows = slice(j * c, (j + 1) * c)
            lo, hi = allgather_prefix(r, self.world, j)
            if lo < hi:
                merge_(self.out[:, rows], self.lse[:, :, rows],
                       *self.attn(q[:, rows], self.kg[:, lo * c:hi * c], self.vg[:, lo * c:hi * c], False))
        self.final.copy_(self.out)
        return self.final

    def __call__(self, qkv):
        q, k, v = qkv
        main = torch.cuda.current_stream()
        self.side.wait_stream(main)  # the inputs are ready, and the last call's reads of kg / vg are done
        with torch.cuda.stream(self.side):
            self.gather(k, v)
        self.local_part(q, k, v)  # meanwhile
        main.wait_stream(self.side)
        return self.remote_part(q)


class AllGatherCompute(AllGather):
    """The all-gather baseline's attention without its all-gather (compute alone, bench/ring_eta.py): the
    gathered K/V are random data already in place."""

    def __init__(self, shape, attn, ctx):
        super().__init__(shape, attn, ctx)
        for t in (self.kg, self.vg):
            t.normal_()

    def gather(self, k, v):
        pass


def compute_alone(backend):
    def build(shape, ctx):
        return AllGatherCompute(shape, attention(backend, ctx.gqa[backend, shape.hkv] == "expand"), ctx)
    return build


def baseline(algo, backend):
    def build(shape, ctx):
        attn = attention(backend, ctx.gqa[backend, shape.hkv] == "expand")
        return {"ring": Ring, "allgather": AllGather, "allgather-mk": AllGatherMk,
                "allgather-mk-overlap": AllGatherMkOverlap}[algo](shape, attn, ctx)
    return build
