"""mkernel.init's unique-id exchange (mkernel._torch_id) between two real processes on a gloo process group, on
the CPU: every rank gets group rank 0's id, a later init a new one, rank 0's failure (a bad knob among them) is
every rank's, and a rank whose rank 0 never comes gives up after MK_BOOTSTRAP_TIMEOUT_MS naming it. Needs torch and
the library (the knob), not a GPU."""
import datetime
import os
import queue
import socket
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import mkernel  # noqa: E402,F401  (the library must load: the children read the knob through it)
from mkernel import _torch_id  # noqa: E402

if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ids(tag):
    def make():
        if dist.get_rank() != 0:
            raise AssertionError("a rank other than group rank 0 made an id")
        return tag * 128
    return make


def _child(rank, port, results, rank0_done):
    try:
        _scenarios(rank, port, results, rank0_done)
    except BaseException as e:  # said to the parent, which would otherwise wait for a result that never comes
        results.put((rank, f"rank {rank} raised {type(e).__name__}: {e}"))
        raise


def _scenarios(rank, port, results, rank0_done):
    os.environ["MK_BOOTSTRAP_TIMEOUT_MS"] = "1500"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    out = []
    out.append(_torch_id.share_unique_id(None, _ids(b"a")))
    out.append(_torch_id.share_unique_id(None, _ids(b"b")))  # a second init: a new key, a new id

    def failing():
        raise ValueError("no interface to listen on")
    try:
        _torch_id.share_unique_id(None, failing)
        out.append("no error")
    except mkernel.MkernelError as e:
        out.append(str(e))
    if rank == 0:  # a bad knob on rank 0 alone: its error reaches rank 1 too (rank 1 would wait its bound)
        os.environ["MK_BOOTSTRAP_TIMEOUT_MS"] = "soon"
    t0 = time.monotonic()
    try:
        _torch_id.share_unique_id(None, _ids(b"k"))
        out.append("no error")
    except mkernel.MkernelError as e:
        out.append((str(e), time.monotonic() - t0))
    os.environ["MK_BOOTSTRAP_TIMEOUT_MS"] = "60s"  # the same bad value on every rank: each raises; the retry meets
    try:
        _torch_id.share_unique_id(None, _ids(b"z"))
        out.append("no error")
    except mkernel.MkernelError as e:
        out.append(str(e))
    os.environ["MK_BOOTSTRAP_TIMEOUT_MS"] = "1500"
    out.append(_torch_id.share_unique_id(None, _ids(b"r")))
    sub = dist.new_group([1])  # a group of one: its rank makes its own id, no wait
    if rank == 1:
        out.append(_torch_id.share_unique_id(sub, lambda: b"s" * 128))
        t0 = time.monotonic()
        try:  # rank 0 never makes this one
            _torch_id.share_unique_id(None, _ids(b"c"))
            out.append("no error")
        except mkernel.MkernelError as e:
            out.append((str(e), time.monotonic() - t0))
        rank0_done.set()
        # the retry waits for the same id again (the failed wait was not counted), which rank 0, late, now makes
        out.append(_torch_id.share_unique_id(None, _ids(b"c")))
    else:
        try:
            _torch_id.share_unique_id(sub, _ids(b"x"))
            out.append("no error")
        except mkernel.MkernelError as e:
            out.append(str(e))
        rank0_done.wait(60)  # rank 1 gave up waiting for this init; rank 0 comes late to it
        out.append(_torch_id.share_unique_id(None, _ids(b"d")))
    dist.barrier()  # (the store lives in rank 0's process: it stays until rank 1 has read)
    results.put((rank, out))
    dist.destroy_process_group()


def test_ranks_share_rank_0s_id_and_a_missing_rank_0_is_named():
    ctx = mp.get_context("spawn")
    results, rank0_done = ctx.Queue(), ctx.Event()
    port = _free_port()
    procs = [ctx.Process(target=_child, args=(r, port, results, rank0_done)) for r in range(2)]
    for p in procs:
        p.start()
    got = {}
    deadline = time.monotonic() + 90
    try:
        while len(got) < 2 and time.monotonic() < deadline:
            try:
                r, out = results.get(timeout=1)
            except queue.Empty:
                continue
            assert not isinstance(out, str), out
            got[r] = out
        assert len(got) == 2, f"results from ranks {sorted(got)} only in 90 s"
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    for r in (0, 1):
        assert got[r][0] == b"a" * 128 and got[r][1] == b"b" * 128, (r, got[r][:2])
        assert "rank 0 could not make the unique id: no interface to listen on" in got[r][2], got[r][2]
        msg, waited = got[r][3]
        assert "rank 0 could not make the unique id: " in msg and "MK_BOOTSTRAP_TIMEOUT_MS='soon'" in msg, msg
        assert waited < 1.0, waited  # sent, not waited out
        assert "MK_BOOTSTRAP_TIMEOUT_MS='60s'" in got[r][4], got[r][4]
        assert got[r][5] == b"r" * 128, (r, got[r][5])  # the ranks' calls still in step after their errors
        got[r] = got[r][:3] + got[r][6:]
    assert got[0][3] == "mkernel.init: this process is not a member of `group`"
    assert got[1][3] == b"s" * 128
    msg, waited = got[1][4]
    assert "rank 1 of 2 waited 1500 ms (MK_BOOTSTRAP_TIMEOUT_MS) for group rank 0 (global rank 0)" in msg, msg
    assert "init #7 on this group" in msg, msg
    assert 1.0 < waited < 20, waited
    assert got[0][4] == got[1][5] == b"d" * 128, (got[0][4:], got[1][5:])


def test_large_groups_alike_in_size_and_ends_get_different_keys():
    a = tuple(r for r in range(40) if r != 5)
    b = tuple(r for r in range(40) if r != 7)
    assert _torch_id._key(a, 1) != _torch_id._key(b, 1)
    # (a list, as torch.distributed.get_process_group_ranks gives, has the tuple's key; another call number another)
    assert _torch_id._key(a, 1) == _torch_id._key(list(a), 1) != _torch_id._key(a, 2)
    assert _torch_id._key(a, 1) != _torch_id._key(a[::-1], 1)  # (the same ranks in another order: another group)
    assert _torch_id._key((0, 3), 1) == "mkernel/init/0-3/1"
