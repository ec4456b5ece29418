"""mkernel.init()'s sharing of the unique id: rank 0 of the group puts it in torch.distributed's store, the other
ranks wait for it there for at most MK_BOOTSTRAP_TIMEOUT_MS and then say who they waited for. Until 2026-12-06 it
went through broadcast_object_list, a collective of the group's backend: a rank that never called init() left the
others waiting for the backend's timeout (10 minutes and more) without a word from mkernel, and under NCCL the
broadcast set up an NCCL communicator only to move 128 bytes.

The store is reached through torch's default store (distributed_c10d._get_default_store, not public API; where a
torch lacks it, init() broadcasts as before)."""
import datetime

from ._lib import MkernelError

_CALLS = {}  # the group's global ranks -> init() calls on that group so far (every rank of it makes the same calls)
_ID, _ERROR = b"I", b"E"  # the stored value's first byte: the id follows, or rank 0's error message (utf-8)


def default_store(dist):
    """torch's default store, or None where this torch does not expose it."""
    get = getattr(getattr(dist, "distributed_c10d", None), "_get_default_store", None)
    try:
        return get() if get is not None else None
    except Exception:  # (no default group: init() refused that before)
        return None


def next_key(ranks):
    """The store key of this init() call on the group of global `ranks` (the n-th call on it: a key per call)."""
    ranks = tuple(ranks)
    n = _CALLS.get(ranks, 0)
    _CALLS[ranks] = n + 1
    return f"mkernel/init/{n}/ranks=" + ",".join(map(str, ranks))


def share(store, key, rank, make, src_global, timeout_ms):
    """The unique id: made by make() on rank 0 and put under `key`; taken from there on the other ranks, which wait
    at most timeout_ms. Rank 0's failure to make it is raised on every rank; a rank that waited in vain raises
    naming what it waited for."""
    if rank == 0:
        try:
            value, error = _ID + make(), None
        except Exception as e:  # sent on: the other ranks would wait for it until their bound
            error = f"mkernel.init: rank 0 could not make the unique id: {e}"
            value = _ERROR + error.encode("utf-8", "replace")
        store.set(key, value)
        if error is not None:
            raise MkernelError(error)
        return value[1:]
    try:
        store.wait([key], datetime.timedelta(milliseconds=timeout_ms))
    except Exception as e:  # (torch raises DistStoreError, a RuntimeError, at the bound)
        raise MkernelError(
            f"mkernel.init: rank {rank} of the group waited {timeout_ms} ms (MK_BOOTSTRAP_TIMEOUT_MS) for the group's "
            f"rank 0 (global rank {src_global}) to share the unique id (torch.distributed store key {key!r}): every "
            f"rank of the group must call mkernel.init(), with the same group, the same number of times "
            f"({type(e).__name__}: {e})") from e
    value = bytes(store.get(key))
    if value[:1] == _ERROR:
        raise MkernelError(value[1:].decode("utf-8", "replace"))
    if value[:1] != _ID:
        raise MkernelError(f"mkernel.init: the store key {key!r} holds {len(value)} bytes that are not a unique id")
    return value[1:]
