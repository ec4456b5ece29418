"""A close (Communicator.close, mkernel.close_plans, a plan's close) on another thread while a call of the
communicator (its own, or making a plan) or of one of its plans is in the library raises, naming that call, and closes nothing: it would
free the memory the call uses. No GPU: the library's calls are test doubles, and the one standing in for the
call in flight runs the closes on another thread before it returns."""
import threading

import pytest

from torchops import torch_ops  # noqa: E402

torch = torch_ops()  # (torch >= 2.4, or the module skips saying why)

import mkernel  # noqa: E402
from mkernel import _ring_attention, _tp_meta, tp, tp_ar  # noqa: E402

_TP = (128, 256, 64)
# (plan, its module, its constructor's arguments, launch method, the library symbol it calls, its inputs)
_CALLS = [("AgGemm", tp, _TP, "_launch", "mk_ag_gemm_run", 3),
          ("AgGemm", tp, _TP, "_launch_all_gather", "mk_ag_gemm_all_gather", 2),
          ("GemmRs", tp, _TP, "_launch", "mk_gemm_rs_run", 3),
          ("GemmRs", tp, _TP, "_launch_reduce_scatter", "mk_gemm_rs_reduce_scatter", 2),
          ("GemmAr", tp_ar, _TP, "_launch", "mk_gemm_ar_run", 3),
          ("GemmAr", tp_ar, _TP, "_launch_all_reduce", "mk_gemm_ar_all_reduce", 2),
          ("RingAttention", _ring_attention, (1, 128, 8, 8, 128, True), "_launch", "mk_ring_attn_run", 5)]
_NAMES = {"_launch": "run", "_launch_all_gather": "all_gather", "_launch_reduce_scatter": "reduce_scatter",
          "_launch_all_reduce": "all_reduce"}


class _Comm(mkernel.Communicator):
    """A mkernel.Communicator whose library handle is a test double's (its world is not asked of the library)."""
    world = 2

    def __init__(self):
        self._h, self._device, self._uid, self._explicit_plans = 0x5150, -1, _tp_meta.new_key(2), []


def _on_thread(fn):
    """fn() on another thread: the exception it raised, or None."""
    got = []

    def body():
        try:
            fn()
        except Exception as e:  # (returned: the test looks at it)
            got.append(e)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    return got[0] if got else None


@pytest.fixture
def lib_doubles(monkeypatch):
    """Records the communicator's and the plans' destroy calls; plans made with handle 0x1234, never captured."""
    destroyed = []
    monkeypatch.setattr(mkernel.lib, "mk_comm_destroy", lambda h: destroyed.append(("comm", h)) or 0)
    for cls in (tp.AgGemm, tp.GemmRs, tp_ar.GemmAr, _ring_attention.RingAttention):
        monkeypatch.setattr(mkernel.lib, cls._destroy,
                            lambda h, name=cls.__name__: destroyed.append((name, h.value)) or 0)
        monkeypatch.setattr(mkernel.lib, cls._captured, lambda h, out: 0)
    for mod in (tp, tp_ar, _ring_attention):
        monkeypatch.setattr(mod, "_need", lambda symbol, op: _made)
        monkeypatch.setattr(mod, "_stream", lambda dev: None)
    return destroyed


def _made(*args):  # a plan's create call: its handle is 0x1234
    args[-1]._obj.value = 0x1234
    return 0


def _inputs(plan, n):
    if n == 5:  # ring attention: q, k, v, out, lse (None: made by the launch)
        q = torch.empty(1, 128, 8, 128, dtype=torch.bfloat16)
        return q, q, q, None, None
    return tuple(torch.empty(64, 64, dtype=torch.bfloat16) for _ in range(n))


@pytest.mark.parametrize("plan,mod,args,method,symbol,n", _CALLS, ids=[f"{c[0]}.{_NAMES[c[3]]}" for c in _CALLS])
def test_a_close_on_another_thread_refuses_while_a_plan_call_is_in_the_library(
        monkeypatch, lib_doubles, plan, mod, args, method, symbol, n):
    comm = _Comm()
    p = getattr(mkernel, plan)(comm, *args)
    monkeypatch.setitem(tp._PLANS, (plan, comm._uid, args), p)  # (as the ops' cache holds it)
    refused = []

    def in_library(*a):
        for close in (comm.close, lambda: mkernel.close_plans(comm), lambda: mkernel.close_plans(), p.close):
            refused.append(_on_thread(close))
        return 0

    monkeypatch.setattr(mkernel.lib, symbol, in_library)
    getattr(p, method)(*_inputs(p, n))
    what = f"mkernel.{plan}.{_NAMES[method]} is in flight"
    assert len(refused) == 4 and all(isinstance(e, RuntimeError) and what in str(e) for e in refused), refused
    assert [str(e).split(":")[0] for e in refused] == ["mkernel.Communicator.close", "mkernel.close_plans",
                                                       "mkernel.close_plans", f"mkernel.{plan}.close"]
    assert lib_doubles == [] and comm._h and p._h and p._in_call is None  # nothing closed
    comm.close()  # the call returned: closes
    assert lib_doubles == [(plan, 0x1234), ("comm", 0x5150)] and not comm._h and not p._h


def test_a_failed_plan_call_leaves_nothing_in_flight(monkeypatch, lib_doubles):
    comm = _Comm()
    p = mkernel.GemmAr(comm, *_TP)
    monkeypatch.setattr(mkernel.lib, "mk_gemm_ar_all_reduce", lambda *a: 1)
    monkeypatch.setattr(mkernel.lib, "mk_last_error", lambda: b"mkernel: refused by the test double")
    with pytest.raises(mkernel.MkernelError, match="refused by the test double"):
        p._launch_all_reduce(*_inputs(p, 2))
    assert p._in_call is None
    comm.close()
    assert lib_doubles == [("GemmAr", 0x1234), ("comm", 0x5150)]


def test_communicator_close_on_another_thread_refuses_while_a_plan_is_being_made(monkeypatch, lib_doubles):
    comm = _Comm()
    refused = []

    def making(*args):
        refused.append(_on_thread(comm.close))
        return _made(*args)

    monkeypatch.setattr(tp_ar, "_need", lambda symbol, op: making)
    p = mkernel.GemmAr(comm, *_TP)
    assert isinstance(refused[0], mkernel.MkernelError)
    assert str(refused[0]).startswith("mkernel.Communicator.close: making the plan of mkernel.GemmAr is in flight")
    assert lib_doubles == [] and comm._in_call is None
    comm.close()
    assert lib_doubles == [("GemmAr", 0x1234), ("comm", 0x5150)] and not p._h


# (the communicator's own call, the library symbol it calls, how the test makes that call)
_OWN = [("barrier", "mk_comm_barrier", lambda c: c.barrier()),
        ("check", "mk_comm_check", lambda c: c.check()),
        ("symmetric_bytes", "mk_comm_symmetric_bytes", lambda c: c.symmetric_bytes()),
        ("_allgather", "mk_comm_allgather", lambda c: c._allgather(b"\x01")),
        ("alloc_symmetric", "mk_symm_alloc", lambda c: c.alloc_symmetric(4096))]


@pytest.mark.parametrize("name,symbol,call", _OWN, ids=[o[0] for o in _OWN])
def test_communicator_close_on_another_thread_refuses_while_one_of_its_own_calls_is_in_the_library(
        monkeypatch, lib_doubles, name, symbol, call):
    comm = _Comm()
    p = mkernel.GemmAr(comm, *_TP)
    refused = []

    def in_library(*a):
        refused.append(_on_thread(comm.close))
        return 1  # (a failed call: its mark must go too; alloc_symmetric makes no buffer then)

    monkeypatch.setattr(mkernel.lib, symbol, in_library)
    monkeypatch.setattr(mkernel.lib, "mk_last_error", lambda: b"mkernel: failed in the test double")
    with pytest.raises(mkernel.MkernelError, match="failed in the test double"):
        call(comm)
    assert isinstance(refused[0], mkernel.MkernelError), refused
    assert str(refused[0]).startswith(f"mkernel.Communicator.close: mkernel.Communicator.{name} is in flight")
    assert lib_doubles == [] and comm._in_call is None and p._h  # nothing closed, the plan neither
    comm.close()
    assert lib_doubles == [("GemmAr", 0x1234), ("comm", 0x5150)] and not p._h


def test_communicator_close_on_another_thread_refuses_while_a_buffers_free_is_in_the_library(
        monkeypatch, lib_doubles):
    comm = _Comm()
    monkeypatch.setattr(mkernel.lib, "mk_symm_info", lambda h, out: 0)
    buf = mkernel.SymmetricBuffer(comm, 0x77)
    refused = []

    def in_library(c, h):
        refused.append(_on_thread(comm.close))
        return 0

    monkeypatch.setattr(mkernel.lib, "mk_symm_free", in_library)
    buf.free()
    assert str(refused[0]).startswith("mkernel.Communicator.close: mkernel.SymmetricBuffer.free is in flight")
    assert lib_doubles == [] and comm._in_call is None and buf._h is None
    comm.close()
    assert lib_doubles == [("comm", 0x5150)]


@pytest.mark.parametrize("plan,mod,args,method,symbol,n", _CALLS, ids=[f"{c[0]}.{_NAMES[c[3]]}" for c in _CALLS])
def test_a_call_refused_as_overlapping_leaves_the_call_in_flight_marked(
        monkeypatch, lib_doubles, plan, mod, args, method, symbol, n):
    # Another thread's call of the plan, which the library refuses while this one is in it (a plan takes one host
    # thread at a time), must not clear this call's mark: a close after it would free what this call uses.
    comm = _Comm()
    p = getattr(mkernel, plan)(comm, *args)
    inside, seen = [], []
    monkeypatch.setattr(mkernel.lib, "mk_last_error", lambda: b"mkernel: refused by the test double (overlap)")

    def in_library(*a):
        if inside:  # the overlapping call: refused at once
            return 1
        inside.append(1)
        seen.append(_on_thread(lambda: getattr(p, method)(*_inputs(p, n))))
        seen.append(_on_thread(p.close))
        return 0

    monkeypatch.setattr(mkernel.lib, symbol, in_library)
    getattr(p, method)(*_inputs(p, n))
    assert "refused by the test double (overlap)" in str(seen[0]), seen
    assert f"mkernel.{plan}.{_NAMES[method]} is in flight" in str(seen[1]), seen
    assert lib_doubles == [] and p._in_call is None


# A plan's other library calls are marked too: the ring plan's trace calls (read_trace synchronises the device, so it
# can be in the library a while) and the captured query the plan cache makes.
@pytest.mark.parametrize("what,symbol", [("read_trace", "mk_ring_attn_read_trace"),
                                         ("enable_trace", "mk_ring_attn_trace"), ("captured", "mk_ring_attn_captured")])
def test_a_close_on_another_thread_refuses_while_a_ring_plans_other_call_is_in_the_library(
        monkeypatch, lib_doubles, what, symbol):
    comm = _Comm()
    p = mkernel.RingAttention(comm, 1, 128, 8, 8, 128, True)
    refused = []

    def in_library(*a):
        refused.append(_on_thread(comm.close))
        return 0

    monkeypatch.setattr(mkernel.lib, symbol, in_library)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: type("P", (), {"multi_processor_count": 4}))
    p._trace_cap = 1
    {"read_trace": p.read_trace, "enable_trace": lambda: p.enable_trace(1), "captured": lambda: p.captured}[what]()
    assert isinstance(refused[0], mkernel.MkernelError), refused
    assert str(refused[0]).startswith(f"mkernel.Communicator.close: mkernel.RingAttention.{what} is in flight")
    assert lib_doubles == [] and p._in_call is None
    comm.close()
    assert lib_doubles == [("RingAttention", 0x1234), ("comm", 0x5150)]


@pytest.mark.parametrize("state", [0, 1, 2])
def test_close_plans_warns_only_for_plans_a_graph_still_holds(monkeypatch, lib_doubles, state):
    # The library's mk_*_captured: 0 never captured, 1 a graph still holds the plan, 2 every such graph is gone.
    import warnings
    comm = _Comm()
    p = mkernel.GemmRs(comm, *_TP)
    monkeypatch.setitem(tp._PLANS, ("GemmRs", comm._uid, _TP), p)
    monkeypatch.setattr(mkernel.lib, "mk_gemm_rs_captured", lambda h, out: setattr(out._obj, "value", state) or 0)
    assert (p.captured, p.graphs_alive) == (state != 0, state == 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mkernel.close_plans(comm)
    said = [str(w.message) for w in caught if "captured in CUDA graphs" in str(w.message)]
    if state == 1:
        assert len(said) == 1 and "closed 1 op plan(s)" in said[0] and "still exist" in said[0], said
    else:
        assert said == [], said
    assert lib_doubles == [("GemmRs", 0x1234)] and not p._h
    assert (p.captured, p.graphs_alive) == (False, False)  # closed
    comm.close()


def test_allgather_returns_each_ranks_bytes_in_rank_order(monkeypatch):
    import ctypes
    comm = _Comm()  # world 2; the library's allgather is a double that gives rank 1's bytes as 9s
    monkeypatch.setattr(mkernel.lib, "mk_comm_allgather",
                        lambda h, mine, n, buf: ctypes.memmove(buf, mine + bytes([9] * n), 2 * n) and 0)
    assert comm._allgather(b"\x01\x00\x02") == [b"\x01\x00\x02", b"\x09\x09\x09"]
    assert comm._allgather(b"") == [b"", b""]
