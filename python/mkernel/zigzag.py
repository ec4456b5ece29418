"""Zigzag sharding of a sequence for causal sequence-parallel (ring) attention.

The full sequence is cut into 2*world equal chunks; rank r holds chunk r
followed by chunk 2*world-1-r. Under a causal mask every rank then gets the
same amount of work (an early chunk sees few keys, its partner many):

    world 2, chunks 0 1 2 3:   rank 0 holds [0, 3], rank 1 holds [1, 2]

    x_local = mkernel.zigzag_shard(x, rank, world)          # (B, S, ...) -> (B, S / world, ...)
    x = mkernel.zigzag_unshard([x_local_0, x_local_1, ...])  # all ranks' shards, ordered by rank
    pos = mkernel.zigzag_positions(rank, world, s_local)     # global position of each local token

A rank's local order is increasing in global position, so a causal mask over
the local tokens alone is the causal mask of the full sequence restricted to
them. Pure torch: no GPU and no library call. Errors raise MkernelError.
"""
import operator

import torch

try:
    from ._lib import MkernelError
except ImportError:  # this file loaded on its own (by path, e.g. without libmkernel.so): same name, same base
    class MkernelError(RuntimeError):
        """Stand-in for mkernel.MkernelError when zigzag.py is loaded outside the package."""


def _int(op, name, v):
    try:
        if isinstance(v, bool):
            raise TypeError
        return operator.index(v)
    except TypeError:
        raise MkernelError(f"mkernel.{op}: {name} must be an integer (got {type(v).__name__})") from None


def _rank_world(op, rank, world):
    rank, world = _int(op, "rank", rank), _int(op, "world", world)
    if world < 1:
        raise MkernelError(f"mkernel.{op}: world must be >= 1 (got {world})")
    if not 0 <= rank < world:
        raise MkernelError(f"mkernel.{op}: rank {rank} is outside [0, {world})")
    return rank, world


def _seq_dim(op, t, seq_dim):
    d = _int(op, "seq_dim", seq_dim)
    if not -t.dim() <= d < t.dim():
        raise MkernelError(f"mkernel.{op}: seq_dim {d} is out of range for a {t.dim()}-D tensor "
                           f"(shape {tuple(t.shape)})")
    return d % t.dim()


def zigzag_shard(x, rank, world, seq_dim=1):
    """Rank `rank`'s shard of the full sequence x: chunk rank and chunk 2*world-1-rank of x's 2*world
    equal chunks along seq_dim, concatenated in that order (a new tensor, S / world long). seq_dim 1 is q / k / v's
    ([batch, seq, heads, head_dim]); an lse ([batch, heads, seq]) takes seq_dim=-1."""
    op = "zigzag_shard"
    if not isinstance(x, torch.Tensor):
        raise MkernelError(f"mkernel.{op}: x must be a torch.Tensor (got {type(x).__name__})")
    rank, world = _rank_world(op, rank, world)
    d = _seq_dim(op, x, seq_dim)
    length = x.shape[d]
    if length == 0 or length % (2 * world):
        raise MkernelError(f"mkernel.{op}: the sequence length {length} (dim {d} of shape {tuple(x.shape)}) must be "
                           f"a positive multiple of 2 * world = {2 * world} (world {world}: 2 chunks per rank)")
    c = length // (2 * world)
    return torch.cat([x.narrow(d, rank * c, c), x.narrow(d, (2 * world - 1 - rank) * c, c)], dim=d)


def zigzag_unshard(shards, seq_dim=1):
    """The full sequence from every rank's zigzag shard (a list ordered by rank): the inverse of
    zigzag_shard. seq_dim 1 is out's ([batch, seq, heads, head_dim]); ring attention's lse ([batch, heads,
    seq]) takes seq_dim=-1."""
    op = "zigzag_unshard"
    if isinstance(shards, torch.Tensor) or not isinstance(shards, (list, tuple)) or not shards:
        raise MkernelError(f"mkernel.{op}: shards must be a non-empty list of tensors, one per rank in rank order")
    for i, s in enumerate(shards):
        if not isinstance(s, torch.Tensor):
            raise MkernelError(f"mkernel.{op}: shards[{i}] is a {type(s).__name__}, not a torch.Tensor")
    d = _seq_dim(op, shards[0], seq_dim)
    shape = tuple(shards[0].shape)
    for i, s in enumerate(shards):
        if tuple(s.shape) != shape or s.dtype != shards[0].dtype or s.device != shards[0].device:
            raise MkernelError(f"mkernel.{op}: shards[{i}] is {tuple(s.shape)} {s.dtype} on {s.device}, shards[0] "
                               f"{shape} {shards[0].dtype} on {shards[0].device}; every rank's shard must match")
    s_local, world = shape[d], len(shards)
    if s_local == 0 or s_local % 2:
        raise MkernelError(f"mkernel.{op}: the local sequence length {s_local} (dim {d} of shape {shape}) must be "
                           "a positive even number (2 chunks per rank); seq_dim names the sequence's dim (an lse "
                           "[batch, heads, seq]: seq_dim=-1)")
    c = s_local // 2
    # Global chunk g < world is the first half of rank g's shard, g >= world the second half of rank 2*world-1-g's.
    pieces = [shards[g].narrow(d, 0, c) if g < world else shards[2 * world - 1 - g].narrow(d, c, c)
              for g in range(2 * world)]
    return torch.cat(pieces, dim=d)


def zigzag_positions(rank, world, s_local, device=None):
    """Global sequence positions (int64, s_local of them, increasing) of rank's local tokens under
    zigzag_shard."""
    op = "zigzag_positions"
    rank, world = _rank_world(op, rank, world)
    s_local = _int(op, "s_local", s_local)
    if s_local <= 0 or s_local % 2:
        raise MkernelError(f"mkernel.{op}: s_local must be a positive even number (2 chunks per rank; got {s_local})")
    c = s_local // 2
    first = torch.arange(rank * c, (rank + 1) * c, dtype=torch.long, device=device)
    second = torch.arange((2 * world - 1 - rank) * c, (2 * world - rank) * c, dtype=torch.long, device=device)
    return torch.cat([first, second])
