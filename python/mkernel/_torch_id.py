"""mkernel.init's unique-id exchange through torch.distributed's store.

Rank 0 of the group makes the id and sets it under a key of its own; every other rank waits for that key for at
most MK_BOOTSTRAP_TIMEOUT_MS and says who it waited for when it gives up. A collective (broadcast_object_list, as
before 2026-12-06) waited for the process group's own timeout (10-30 min by default) and, when it gave up, said
nothing of which rank had not come. The store needs no tensor and no device, so it serves a gloo, NCCL or mixed
group alike. Once the ranks have the id, the library's bootstrap waits for them, bounded by the same knob, naming
any rank that does not join. So every rank must reach init within MK_BOOTSTRAP_TIMEOUT_MS (default 60 s) of group
rank 0, as on the launcher path; where start-up is uneven (checkpoint loading before init), raise the knob."""
import datetime
import hashlib

from ._lib import MkernelError, knob_int

# Calls of init a group has seen in this process: the ranks of a group call init in the same order (as they would a
# collective), so the n-th call's key is the same on each of them and a later init never reads an earlier id.
_CALLS = {}


def _key(ranks, n):
    # the group's global ranks: whole for small groups, else a digest of the whole list (two groups alike in
    # size, first and last rank must not share a key)
    rs = "-".join(map(str, ranks))
    if len(ranks) > 16:
        rs = f"{len(ranks)}r-" + hashlib.sha1(rs.encode()).hexdigest()[:20]
    return f"mkernel/init/{rs}/{n}"


def share_unique_id(group, make_id):
    """The id that group rank 0 made with make_id(), on every rank of `group` (None: the default group).
    An error of make_id on rank 0 is raised on every rank."""
    import torch.distributed as dist

    rank = dist.get_rank(group)
    if rank < 0:
        raise MkernelError("mkernel.init: this process is not a member of `group`")
    ranks = tuple(dist.get_process_group_ranks(group if group is not None else dist.group.WORLD))
    if len(ranks) == 1:
        return make_id()
    # Counted on every rank before anything can raise: a rank whose own knob is bad has used up call n as rank 0
    # has, so that a retry meets rank 0 at n + 1 (not counting it put the ranks' keys out of step for good).
    n = _CALLS[ranks] = _CALLS.get(ranks, 0) + 1
    key = _key(ranks, n)
    if rank != 0:
        ms = knob_int("MK_BOOTSTRAP_TIMEOUT_MS")
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        try:
            knob_int("MK_BOOTSTRAP_TIMEOUT_MS")  # rank 0's bad value is every rank's error, not its alone
            uid = make_id()
        except Exception as e:  # sent on: the other ranks would wait for the id until their bound
            msg = f"mkernel.init: rank 0 could not make the unique id: {e}"
            store.set(key, b"E" + msg.encode())
            raise MkernelError(msg) from e
        store.set(key, b"I" + uid)
        return uid
    try:
        store.wait([key], datetime.timedelta(milliseconds=ms))
    except RuntimeError as e:  # torch's DistStoreError: a timeout, or the store's host gone
        _CALLS[ranks] = n - 1  # not counted: a retry waits for the same id (rank 0 may only have been late)
        raise MkernelError(
            f"mkernel.init: rank {rank} of {len(ranks)} waited {ms} ms (MK_BOOTSTRAP_TIMEOUT_MS) for group rank 0 "
            f"(global rank {ranks[0]}) to make the unique id and it did not (that rank has not called mkernel.init "
            f"for this group, or it is gone; init #{n} on this group here): {e}") from None
    value = store.get(key)
    if value[:1] == b"E":
        raise MkernelError(value[1:].decode())
    return value[1:]
