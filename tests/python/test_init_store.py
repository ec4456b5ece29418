"""mkernel.init()'s sharing of the unique id through torch.distributed's store (python/mkernel/_init_store.py), on
the CPU: ranks as threads on one HashStore; init() itself on a one-rank gloo group with the communicator replaced
by a test double."""
import threading
import time

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available in this torch", allow_module_level=True)

import mkernel  # noqa: E402
from mkernel import _init_store  # noqa: E402
from mkernel._lib import MkernelError  # noqa: E402


def _ranks(store, key, world, make, timeout_ms=5000):
    """share() on `world` ranks (threads, rank 0 last): each rank's result or exception."""
    out = [None] * world

    def one(r):
        try:
            out[r] = _init_store.share(store, key, r, make, 0, timeout_ms)
        except Exception as e:  # noqa: BLE001  (the test reads it)
            out[r] = e
    threads = [threading.Thread(target=one, args=(r,)) for r in range(1, world)]
    for t in threads:
        t.start()
    time.sleep(0.05)  # the waiters wait first
    one(0)
    for t in threads:
        t.join(10)
    return out


def test_every_rank_gets_rank_0s_id():
    uid = bytes(range(128))
    got = _ranks(dist.HashStore(), "k", 3, lambda: uid)
    assert got == [uid, uid, uid]


def test_rank_0s_failure_to_make_the_id_is_raised_on_every_rank():
    def fail():
        raise RuntimeError("no entropy")
    got = _ranks(dist.HashStore(), "k", 2, fail)
    for e in got:
        assert isinstance(e, MkernelError) and "rank 0 could not make the unique id: no entropy" in str(e)


def test_a_rank_whose_rank_0_never_comes_raises_within_the_bound_naming_what_it_waited_for():
    t0 = time.monotonic()
    with pytest.raises(MkernelError) as e:
        _init_store.share(dist.HashStore(), "mkernel/init/0/ranks=4,5", 1, lambda: b"x", 4, 300)
    took = time.monotonic() - t0
    assert 0.25 < took < 5, took
    msg = str(e.value)
    for part in ("rank 1 of the group waited 300 ms (MK_BOOTSTRAP_TIMEOUT_MS)", "global rank 4",
                 "'mkernel/init/0/ranks=4,5'", "every rank of the group must call mkernel.init()"):
        assert part in msg, msg


def test_a_key_that_holds_no_id_is_refused():
    store = dist.HashStore()
    store.set("k", b"junk")
    with pytest.raises(MkernelError, match="holds 4 bytes that are not a unique id"):
        _init_store.share(store, "k", 1, lambda: b"x", 0, 1000)


def test_each_call_on_a_group_has_its_own_key(monkeypatch):
    monkeypatch.setattr(_init_store, "_CALLS", {})
    keys = [_init_store.next_key([0, 1]), _init_store.next_key((0, 1)), _init_store.next_key(range(3))]
    assert keys == ["mkernel/init/0/ranks=0,1", "mkernel/init/1/ranks=0,1", "mkernel/init/0/ranks=0,1,2"]


def test_init_shares_the_id_through_the_default_store(monkeypatch, tmp_path):
    made = []

    class Recorded:
        def __init__(self, rank, world, uid, device):
            made.append((rank, world, uid, device))
    monkeypatch.setattr(mkernel, "Communicator", Recorded)
    monkeypatch.setattr(mkernel, "get_unique_id", lambda: b"\x07" * 128)
    monkeypatch.setattr(_init_store, "_CALLS", {})
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        mkernel.init(device=0)
        mkernel.init(device=0)
        store = _init_store.default_store(dist)
        assert bytes(store.get("mkernel/init/1/ranks=0")) == b"I" + b"\x07" * 128
    finally:
        dist.destroy_process_group()
    assert made == [(0, 1, b"\x07" * 128, 0)] * 2
