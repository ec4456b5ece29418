"""Tensor-parallel fused ops on torch tensors (any N nodes x L GPUs, at most 8 ranks for gemm_rs /
reduce_scatter; see include/mkernel/tp.hpp).

    comm = mkernel.init()                          # inside torchrun
    out = mkernel.ag_gemm(x_shard, w_col, comm)    # allgather(x_shard) @ w_col^T
    y = mkernel.gemm_rs(h, w_row, comm)            # this rank's rows of sum_ranks h @ w_row^T
    g = mkernel.all_gather(x_shard, comm)          # the collectives alone
    r = mkernel.reduce_scatter(x, comm)            # this rank's rows of sum_ranks x
    y = mkernel.gemm_ar(h, w_row, comm)            # sum_ranks h @ w_row^T on every rank, and
    s = mkernel.all_reduce(x, comm)                # sum_ranks x: mkernel/tp_ar.py, on this module's helpers

Each op is a torch custom op (namespace "mkernel": ag_gemm, ag_gemm_gathered,
gemm_rs, all_gather, reduce_scatter, and *_out variants that write into
out=) with a fake implementation, so torch.compile traces it, and an
autograd formula made of these ops and torch matmuls (so the backward is
traced too). The communicator reaches the ops as an int key (mkernel/_tp_meta.py),
registered when the communicator is created. Eager calls that autograd need not record
go straight to the library, skipping the dispatcher.

Each call uses a plan cached per (communicator, op, shape): the first call
with a new shape creates it, collectively, so every rank must make the same
calls in the same order (as with any collective; backward passes too, so
every rank must use the outputs the same way). Steady-state calls allocate
only their output, never synchronise the host, run on the current stream
and can be captured in CUDA graphs. The explicit plans (mkernel.AgGemm,
mkernel.GemmRs, mkernel.GemmAr) are there for callers that manage their own;
they have no backward, so their methods refuse inputs that require grad while
autograd records. A plan takes one host thread at a time: a call overlapping
another thread's call of it raises, and so does a close of it or of its
communicator while another thread's call of it is in the library. bf16 only.
"""
import ctypes
import warnings

import torch
from . import _torch_req  # noqa: F401  (torch >= 2.4: a clear ImportError before the custom ops' decorators)

from ._lib import MkernelError, knob_int, lib, outside_stacklevel
from ._ops_c import _need
from ._plan_cache import close_oldest, held_by_graphs, start_over_at
from ._tp_meta import (_COMMS, MAX_RS_RANKS, Mismatch, comm_handle, register, lookup, world, ag_gemm_shapes,
                       gemm_rs_shape, all_gather_shape, marked_call, reduce_scatter_shape, refuse_close_in_flight,
                       cached_shape as _shape)
from ._tp_plans import _Plan, _check_shape, _device_check, _ptr, check_aligned, check_apart, plan_ints, refuse_pair
from .ops import (_check_matrix, _fast_apart, _fast_ok, _get_device, _stream, bump_version, dense16,
                  inputs_grad_refused, modes_on, out_grad_refused, traced)

__all__ = ["ag_gemm", "gemm_rs", "all_gather", "reduce_scatter", "AgGemm", "GemmRs", "register", "close_plans"]


class AgGemm(_Plan):
    """out [world * m_local, n] = allgather(a_local) @ b^T; one persistent kernel."""
    _destroy = "mk_ag_gemm_destroy"
    _captured = "mk_ag_gemm_captured"

    def __init__(self, comm, m_local, n, k, num_comm_ctas=0, num_ctas=0):
        ch = comm_handle(comm, "mkernel.AgGemm")
        m_local, n, k, num_comm_ctas, num_ctas = plan_ints("mkernel.AgGemm", dict(m_local=m_local, n=n, k=k),
                                                           dict(num_comm_ctas=num_comm_ctas, num_ctas=num_ctas))
        h = ctypes.c_void_p()
        marked_call(comm, "making the plan of mkernel.AgGemm", _need("mk_ag_gemm_create", "ag_gemm"), ch, m_local, n,
                    k, num_comm_ctas, num_ctas, ctypes.byref(h))
        self._bind(comm, h)
        self.world, self.shape = comm.world, (m_local, n, k)

    def run(self, a_local, b, out=None, gathered=None):
        m_local, n, k = self.shape
        self._open(a_local, "a_local")
        op = "mkernel.AgGemm.run"
        out_grad_refused(op, out, gathered)
        inputs_grad_refused(op, a_local, b)
        _check_shape(a_local, "a_local", (m_local, k), op=op)
        _check_shape(b, "b", (n, k), a_local.device, op=op)
        if out is None:
            out = a_local.new_empty((self.world * m_local, n))
        _check_shape(out, "out", (self.world * m_local, n), a_local.device, op=op)
        check_apart(op, "out", out, ("a_local", a_local), ("b", b))
        if gathered is not None:
            _check_shape(gathered, "gathered", (self.world * m_local, k), a_local.device, op=op)
            check_apart(op, "gathered", gathered, ("a_local", a_local), ("b", b), ("out", out))
        res = self._launch(a_local, b, out, gathered)
        bump_version(out, gathered)  # (a given out= changed: autograd is told, as by torch's in-place ops)
        return res

    def _launch(self, a_local, b, out, gathered=None):  # checked by the caller
        self._lib_call("mkernel.AgGemm.run", lib.mk_ag_gemm_run, self._h, a_local.data_ptr(), b.data_ptr(),
                       out.data_ptr(), _ptr(gathered), _stream(a_local.get_device()))
        return out

    def all_gather(self, a_local, out=None):
        """out [world * m_local, k] = allgather(a_local) (the plan's n is not used)."""
        m_local, _, k = self.shape
        self._open(a_local, "a_local")
        op = "mkernel.AgGemm.all_gather"
        out_grad_refused(op, out)
        inputs_grad_refused(op, a_local)
        _check_shape(a_local, "a_local", (m_local, k), op=op)
        if out is None:
            out = a_local.new_empty((self.world * m_local, k))
        _check_shape(out, "out", (self.world * m_local, k), a_local.device, op=op)
        check_apart(op, "out", out, ("a_local", a_local))
        return bump_version(self._launch_all_gather(a_local, out))

    def _launch_all_gather(self, a_local, out):  # checked by the caller
        self._lib_call("mkernel.AgGemm.all_gather", lib.mk_ag_gemm_all_gather, self._h, a_local.data_ptr(),
                       out.data_ptr(), _stream(a_local.get_device()))
        return out


class GemmRs(_Plan):
    """out [m / world, n] = this rank's rows of sum over ranks of a @ b^T."""
    _destroy = "mk_gemm_rs_destroy"
    _captured = "mk_gemm_rs_captured"

    def __init__(self, comm, m, n, k_local, num_reduce_ctas=0, num_ctas=0):
        ch = comm_handle(comm, "mkernel.GemmRs")
        m, n, k_local, num_reduce_ctas, num_ctas = plan_ints("mkernel.GemmRs", dict(m=m, n=n, k_local=k_local),
                                                             dict(num_reduce_ctas=num_reduce_ctas, num_ctas=num_ctas))
        h = ctypes.c_void_p()
        marked_call(comm, "making the plan of mkernel.GemmRs", _need("mk_gemm_rs_create", "gemm_rs"), ch, m, n,
                    k_local, num_reduce_ctas, num_ctas, ctypes.byref(h))
        self._bind(comm, h)
        self.world, self.shape = comm.world, (m, n, k_local)

    def run(self, a, b, out=None):
        m, n, k = self.shape
        self._open(a, "a")
        op = "mkernel.GemmRs.run"
        out_grad_refused(op, out)
        inputs_grad_refused(op, a, b)
        _check_shape(a, "a", (m, k), op=op)
        _check_shape(b, "b", (n, k), a.device, op=op)
        if out is None:
            out = a.new_empty((m // self.world, n))
        _check_shape(out, "out", (m // self.world, n), a.device, op=op)
        check_apart(op, "out", out, ("a", a), ("b", b))
        return bump_version(self._launch(a, b, out))

    def _launch(self, a, b, out):  # checked by the caller
        self._lib_call("mkernel.GemmRs.run", lib.mk_gemm_rs_run, self._h, a.data_ptr(), b.data_ptr(), out.data_ptr(),
                       _stream(a.get_device()))
        return out

    def reduce_scatter(self, x, out=None):
        """out [m / world, n] = this rank's rows of sum over ranks of x [m, n] (the plan's k_local is not used)."""
        m, n, _ = self.shape
        self._open(x, "x")
        op = "mkernel.GemmRs.reduce_scatter"
        out_grad_refused(op, out)
        inputs_grad_refused(op, x)
        _check_shape(x, "x", (m, n), op=op)
        if out is None:
            out = x.new_empty((m // self.world, n))
        _check_shape(out, "out", (m // self.world, n), x.device, op=op)
        check_apart(op, "out", out, ("x", x))
        return bump_version(self._launch_reduce_scatter(x, out))

    def _launch_reduce_scatter(self, x, out):  # checked by the caller
        self._lib_call("mkernel.GemmRs.reduce_scatter", lib.mk_gemm_rs_reduce_scatter, self._h, x.data_ptr(),
                       out.data_ptr(), _stream(x.get_device()))
        return out


# ---- plan cache --------------------------------------------------------------------------------

_PLANS = {}
_COLLECTIVE_N = 64  # the all-gather's plan is an AgGemm with this (unused) n; the reduce-scatter's a GemmRs with this k
# Plans cached for one communicator from which a warning is given (once per communicator): each holds device
# memory sized by its shape (staging or gathered buffers) and signal words, and stays until close_plans.
PLAN_WARN_COUNT = 64
_WARNED = set()
_WARNED_CAPTURED = set()  # communicators told that captured plans hold their cache above MK_PLAN_CACHE_MAX
_EVICTED = set()  # keys of plans the bound closed (until close_plans)


def _plan(cls, key, *shape):
    pkey = (cls.__name__, key, shape)
    p = _PLANS.get(pkey)
    if p is None:
        # Creating a plan is collective and allocates: never inside a CUDA
        # graph capture (run the op once, with these shapes, before capturing).
        if torch.cuda.is_current_stream_capturing():
            if pkey in _EVICTED:
                raise MkernelError(f"mkernel: the {cls.__name__} plan for shape {shape} was closed by the cache "
                                   f"bound (MK_PLAN_CACHE_MAX={knob_int('MK_PLAN_CACHE_MAX')}) after the warm-up "
                                   "made it, and plans cannot be made during CUDA-graph capture: raise the bound "
                                   "above the number of plans the captured code needs (its backward's included)")
            raise MkernelError(f"mkernel: no {cls.__name__} plan for shape {shape} yet, and plans cannot be made "
                               "during CUDA-graph capture; call the op once with these shapes before capturing")
        # MK_PLAN_CACHE_MAX > 0: the communicator's oldest plans are closed first (collective, in the same
        # order on every rank); the steady-state entries of its calls go with them (they hold launches).
        # Plans that a CUDA graph on some rank still holds stay (a replay uses them; the ranks agree on
        # which in one exchange, only where a captured plan is among the oldest the bound closes).
        limit = knob_int("MK_PLAN_CACHE_MAX")
        # before_closing first: none may launch a plan whose close failed
        held = [k for k in list(_PLANS) if k[1] == key] if limit > 0 else []
        keep = held_by_graphs(_PLANS, key, limit, lambda b: lookup(key)._allgather(b))
        _, short = close_oldest(_PLANS, key, limit, lambda: _drop_hot(key), keep)
        start_over_at(_EVICTED)  # (many shapes come and go: the set only words an error)
        _EVICTED.update(k for k in held if k not in _PLANS)  # (a capture that needs one says why it is gone)
        _EVICTED.discard(pkey)
        if short and key not in _WARNED_CAPTURED:
            _WARNED_CAPTURED.add(key)
            warnings.warn(f"mkernel: MK_PLAN_CACHE_MAX={limit} is exceeded: {short + limit - 1} of this "
                          "communicator's cached op plans are held by CUDA graphs that still exist (on some "
                          "rank), which use them when replayed, so the bound does not close them; raise the "
                          "bound, or destroy those graphs (the bound then closes their plans). Said once.",
                          RuntimeWarning,
                          stacklevel=outside_stacklevel())
        p = _PLANS[pkey] = cls(lookup(key), *shape)
        if limit <= 0 and key not in _WARNED:
            n = sum(1 for k in list(_PLANS) if k[1] == key)
            if n >= PLAN_WARN_COUNT:
                _WARNED.add(key)
                held = lookup(key).symmetric_bytes() / 2**20
                warnings.warn(f"mkernel: {n} op plans are cached for this communicator, one per distinct shape, "
                              f"each holding device memory sized by its shape ({held:.0f} MiB of symmetric memory "
                              "on this rank now) until mkernel.close_plans(comm) (collective: every rank at the "
                              "same point) frees them; call it when shapes change for good, pad inputs to fewer "
                              "shapes, or bound the cache (MK_PLAN_CACHE_MAX: its oldest plans are closed, but not "
                              "those a CUDA graph still holds)", RuntimeWarning,
                              stacklevel=outside_stacklevel())
    return p


def _drop_hot(key):
    """Forgets the steady-state entries of communicator `key` (they hold launches of its plans)."""
    for hk in [k for k in list(_HOT) if k[1] == key]:  # (snapshots: other threads' communicators add theirs)
        _HOT.pop(hk, None)


def close_plans(comm=None):
    """Collective (every rank at the same point): frees the cached plans (of one communicator, or all),
    their device memory and their signal words; later calls make the plans they need
    again. A CUDA graph captured with a plan's launches must not be replayed after its plan was closed
    (a warning names how many closed plans such graphs still held)."""
    if comm is not None and not hasattr(comm, "_uid"):
        raise MkernelError(f"mkernel.close_plans: comm must be an mkernel.Communicator or None (got "
                           f"{type(comm).__name__})")
    keys = [k for k in list(_PLANS) if comm is None or k[1] == comm._uid]
    refuse_close_in_flight("mkernel.close_plans", None, [_PLANS.get(k) for k in keys])  # (before any is closed)
    _HOT.clear()  # its entries hold launches of these plans
    held = sum(1 for k in keys if _PLANS[k].graphs_alive)  # (graphs already destroyed need no warning)
    for key in keys:
        _PLANS.pop(key).close()
    if held:
        warnings.warn(f"mkernel: close_plans closed {held} op plan(s) whose launches were captured in CUDA "
                      "graphs that still exist: replaying those graphs now would use freed memory and signal "
                      "words; destroy them, and capture again after the ops made new plans", RuntimeWarning,
                      stacklevel=outside_stacklevel())
    _EVICTED.difference_update([k for k in list(_EVICTED) if comm is None or k[1] == comm._uid])
    if comm is None:
        _WARNED.clear()
        _WARNED_CAPTURED.clear()
    else:
        _WARNED.discard(comm._uid)
        _WARNED_CAPTURED.discard(comm._uid)


# ---- steady-state calls --------------------------------------------------------------------------
# A call that repeats an earlier call's (op, communicator, input shapes) and
# needs no dispatcher (not tracing, autograd not recording) takes _hot(): one
# combined check of dtype, device and layout, one dict lookup for the plan's
# launch, no layered checks (bench/python_overhead.py times it; issue
# [python]: under 10 us a call). Anything unusual -- a new shape, a bad,
# non-contiguous or unaligned tensor, a wrong out or one overlapping an
# input, grad, a closed communicator -- returns None, and the full path
# checks, raises with the detailed message, or runs.
# Entries are made by the full path after a successful launch (_hot_add).

# (op, communicator key, shape of a, shape of b or None) -> (launch, output shape); ring attention
# keeps its entries here too ("ring_attention", key, q, k, v shapes, causal, scale) -> launch.
_HOT = {}
_BF16 = torch.bfloat16
_compiling = torch.compiler.is_compiling
_grad_on = torch.is_grad_enabled


def _hot_add(op, key, a, b, launch, out_shape):
    _HOT[(op, key, a.shape, None if b is None else b.shape)] = (launch, tuple(out_shape))


def _hot(op, comm, out, a, b=None):
    """The output of a steady-state call of `op` (launched), or None (take the full path)."""
    if modes_on():  # first (torch.compile traces none of what follows); subclasses: _fast_ok
        return None
    try:
        launch, out_shape = _HOT[(op, comm._uid, a.shape, None if b is None else b.shape)]
        if not comm._h:
            return None
        comm_dev = comm._device
    except (KeyError, AttributeError, TypeError):
        return None
    dev = _get_device()
    if dev != comm_dev:  # (the full path says which device is wrong)
        return None
    if not _fast_ok(a, _BF16, dev) or (b is not None and not _fast_ok(b, _BF16, dev)):
        return None
    if _grad_on() and (a.requires_grad or (b is not None and b.requires_grad)):
        return None
    given = out is not None
    if not given:
        out = a.new_empty(out_shape)
    elif (not _fast_ok(out, _BF16, dev) or out.shape != out_shape or (out.requires_grad and _grad_on())
          or not _fast_apart(out, a, b, same_ok=op == "all_reduce")):
        return None
    if b is None:
        launch(a, out)
    else:
        launch(a, b, out)
    if given:
        bump_version(out)
    return out


# ---- checks and library calls (eager; the custom ops' implementations) -------------------------

def _check_inputs(op, *named):
    """dtype, device, rank and layout of (name, tensor) pairs: what needs no shape rule or world size.
    Runs under torch.compile's tracing too (no library call)."""
    first = None
    for name, t in named:
        _check_matrix(t, name, None if first is None else first.device, op="mkernel." + op)
        if not t.is_contiguous():
            raise MkernelError(f"mkernel.{op}: {name} must be contiguous (got shape {list(t.shape)}, strides "
                               f"{t.stride()}); call .contiguous()")
        if not torch.compiler.is_compiling():  # (traced tensors have no address)
            check_aligned(t, name, "mkernel." + op)
        if first is None:
            first = t


def _check_meta(op, *named):
    """The fake implementations' check: dtype and rank only (layouts are the real ones' business)."""
    for name, t in named:
        if t.dtype != torch.bfloat16 or t.dim() != 2:
            raise MkernelError(f"mkernel.{op}: {name} must be a 2-D bfloat16 tensor (got {t.dtype}, "
                               f"shape {list(t.shape)})")


def _check_out_meta(op, name, t, shape):
    _check_meta(op, (name, t))
    if tuple(t.shape) != tuple(shape):
        raise MkernelError(f"mkernel.{op}: {name} must be {list(shape)} (got {list(t.shape)})")


def _key(comm):
    """The communicator's registry key, the int the custom ops take."""
    if torch.compiler.is_compiling():
        return comm._uid  # registered at creation; the fake implementations look it up
    key = getattr(comm, "_uid", None)
    if key not in _COMMS:
        key = register(comm)  # raises for a closed communicator or another object
    return key


# Shape rules (with the world size) and the check of a given out come before
# the plan lookup. The rules' size checks are left to the plan (sizes=False):
# its constructor checks them on every rank at once, so a rank's bad size
# (no rows, say) fails every rank, naming it, where a refusal here left the
# others waiting for it in the plan check (mkernel/_tp_meta.py). What the
# library cannot see (dtype, device, layout, alignment, b against a, out) is
# refused here (b against a on a shape's first call after taking part in the plan check: refuse_pair).
# Inputs were checked by the caller (_check_inputs), so the plans are called without their own checks; a shape
# rule's result is cached per shapes (_tp_meta.cached_shape).


def _output(out, shape, like, key, op, *inputs, same_ok=False):
    """The call's output (made, or the given `out` checked: shape, device, alignment, and apart from the
    (name, tensor) `inputs`; same_ok: check_apart's) after the inputs' device check."""
    _device_check(like, "the inputs", getattr(lookup(key), "_device", None))
    if out is None:
        return like.new_empty(shape)
    _check_shape(out, "out", shape, like.device, op="mkernel." + op)
    check_apart("mkernel." + op, "out", out, *inputs, same_ok=same_ok)
    return out


def _ag_gemm_run(a_local, b, key, out=None, gathered=None, want_gathered=False):
    try:
        out_shape, gathered_shape = _shape(ag_gemm_shapes, a_local.shape, b.shape, world(key))
    except Mismatch as e:
        refuse_pair(e, _plan, _PLANS, AgGemm, key, a_local, b)
    out = _output(out, out_shape, a_local, key, "ag_gemm", ("a_local", a_local), ("b", b))
    if gathered is not None:
        _check_shape(gathered, "gathered", gathered_shape, a_local.device, op="mkernel.ag_gemm")
        check_apart("mkernel.ag_gemm", "gathered", gathered, ("a_local", a_local), ("b", b), ("out", out))
    elif want_gathered:
        gathered = a_local.new_empty(gathered_shape)
    plan = _plan(AgGemm, key, a_local.shape[0], b.shape[0], a_local.shape[1])
    plan._launch(a_local, b, out, gathered)
    if gathered is None:
        _hot_add("ag_gemm", key, a_local, b, plan._launch, out_shape)
    return out, gathered


def _gemm_rs_run(a, b, key, out=None):
    try:
        shape = _shape(gemm_rs_shape, a.shape, b.shape, world(key))
    except Mismatch as e:
        refuse_pair(e, _plan, _PLANS, GemmRs, key, a, b)
    out = _output(out, shape, a, key, "gemm_rs", ("a", a), ("b", b))
    plan = _plan(GemmRs, key, a.shape[0], b.shape[0], a.shape[1])
    plan._launch(a, b, out)
    _hot_add("gemm_rs", key, a, b, plan._launch, out.shape)
    return out


def _all_gather_run(a_local, key, out=None):
    out = _output(out, _shape(all_gather_shape, a_local.shape, world(key)), a_local, key, "all_gather",
                  ("a_local", a_local))
    plan = _plan(AgGemm, key, a_local.shape[0], _COLLECTIVE_N, a_local.shape[1])
    plan._launch_all_gather(a_local, out)
    _hot_add("all_gather", key, a_local, None, plan._launch_all_gather, out.shape)
    return out


def _reduce_scatter_run(x, key, out=None):
    out = _output(out, _shape(reduce_scatter_shape, x.shape, world(key)), x, key, "reduce_scatter", ("x", x))
    plan = _plan(GemmRs, key, x.shape[0], x.shape[1], _COLLECTIVE_N)
    plan._launch_reduce_scatter(x, out)
    _hot_add("reduce_scatter", key, x, None, plan._launch_reduce_scatter, out.shape)
    return out


# ---- custom ops ----------------------------------------------------------------------------------
# The implementations take inputs of any row-major layout and start (dense16:
# free when they already are dense and 16-byte aligned): torch.compile's
# generated code may hand them other strides than the eager code it replaces,
# and autograd a gradient that starts at an odd offset. The public functions below
# still refuse non-contiguous inputs (a copy the caller did not ask for).
# Schemas (torch.ops.mkernel.*), comm being the registry key:
#   ag_gemm(Tensor a_local, Tensor b, SymInt comm) -> Tensor
#   ag_gemm_gathered(Tensor a_local, Tensor b, SymInt comm) -> (Tensor out, Tensor gathered)
#   gemm_rs(Tensor a, Tensor b, SymInt comm) -> Tensor
#   all_gather(Tensor a_local, SymInt comm) -> Tensor
#   reduce_scatter(Tensor x, SymInt comm) -> Tensor
#   ag_gemm_out / ag_gemm_gathered_out / gemm_rs_out / all_gather_out / reduce_scatter_out:
#       the same inputs, then Tensor(a!) out (and Tensor(b!) gathered) -> ()

@torch.library.custom_op("mkernel::ag_gemm", mutates_args=())
def _ag_gemm_op(a_local: torch.Tensor, b: torch.Tensor, comm: int) -> torch.Tensor:
    a_local, b = dense16(a_local), dense16(b)
    _check_inputs("ag_gemm", ("a_local", a_local), ("b", b))
    return _ag_gemm_run(a_local, b, comm)[0]


@_ag_gemm_op.register_fake
def _(a_local, b, comm):
    _check_meta("ag_gemm", ("a_local", a_local), ("b", b))
    return a_local.new_empty(ag_gemm_shapes(a_local.shape, b.shape, world(comm))[0])


@torch.library.custom_op("mkernel::ag_gemm_gathered", mutates_args=())
def _ag_gemm_gathered_op(a_local: torch.Tensor, b: torch.Tensor, comm: int) -> tuple[torch.Tensor, torch.Tensor]:
    a_local, b = dense16(a_local), dense16(b)
    _check_inputs("ag_gemm", ("a_local", a_local), ("b", b))
    return _ag_gemm_run(a_local, b, comm, want_gathered=True)


@_ag_gemm_gathered_op.register_fake
def _(a_local, b, comm):
    _check_meta("ag_gemm", ("a_local", a_local), ("b", b))
    out_shape, gathered_shape = ag_gemm_shapes(a_local.shape, b.shape, world(comm))
    return a_local.new_empty(out_shape), a_local.new_empty(gathered_shape)


@torch.library.custom_op("mkernel::gemm_rs", mutates_args=())
def _gemm_rs_op(a: torch.Tensor, b: torch.Tensor, comm: int) -> torch.Tensor:
    a, b = dense16(a), dense16(b)
    _check_inputs("gemm_rs", ("a", a), ("b", b))
    return _gemm_rs_run(a, b, comm)


@_gemm_rs_op.register_fake
def _(a, b, comm):
    _check_meta("gemm_rs", ("a", a), ("b", b))
    return a.new_empty(gemm_rs_shape(a.shape, b.shape, world(comm)))


@torch.library.custom_op("mkernel::all_gather", mutates_args=())
def _all_gather_op(a_local: torch.Tensor, comm: int) -> torch.Tensor:
    a_local = dense16(a_local)
    _check_inputs("all_gather", ("a_local", a_local))
    return _all_gather_run(a_local, comm)


@_all_gather_op.register_fake
def _(a_local, comm):
    _check_meta("all_gather", ("a_local", a_local))
    return a_local.new_empty(all_gather_shape(a_local.shape, world(comm)))


@torch.library.custom_op("mkernel::reduce_scatter", mutates_args=())
def _reduce_scatter_op(x: torch.Tensor, comm: int) -> torch.Tensor:
    x = dense16(x)
    _check_inputs("reduce_scatter", ("x", x))
    return _reduce_scatter_run(x, comm)


@_reduce_scatter_op.register_fake
def _(x, comm):
    _check_meta("reduce_scatter", ("x", x))
    return x.new_empty(reduce_scatter_shape(x.shape, world(comm)))


# out= variants (mutating, no autograd: the wrappers refuse out= when autograd must record).

@torch.library.custom_op("mkernel::ag_gemm_out", mutates_args=("out",))
def _ag_gemm_out_op(a_local: torch.Tensor, b: torch.Tensor, comm: int, out: torch.Tensor) -> None:
    a_local, b = dense16(a_local), dense16(b)
    _check_inputs("ag_gemm", ("a_local", a_local), ("b", b))
    _ag_gemm_run(a_local, b, comm, out)


@_ag_gemm_out_op.register_fake
def _(a_local, b, comm, out):
    _check_meta("ag_gemm", ("a_local", a_local), ("b", b))
    _check_out_meta("ag_gemm", "out", out, ag_gemm_shapes(a_local.shape, b.shape, world(comm))[0])


@torch.library.custom_op("mkernel::ag_gemm_gathered_out", mutates_args=("out", "gathered"))
def _ag_gemm_gathered_out_op(a_local: torch.Tensor, b: torch.Tensor, comm: int, out: torch.Tensor,
                             gathered: torch.Tensor) -> None:
    a_local, b = dense16(a_local), dense16(b)
    _check_inputs("ag_gemm", ("a_local", a_local), ("b", b))
    _ag_gemm_run(a_local, b, comm, out, gathered)


@_ag_gemm_gathered_out_op.register_fake
def _(a_local, b, comm, out, gathered):
    _check_meta("ag_gemm", ("a_local", a_local), ("b", b))
    out_shape, gathered_shape = ag_gemm_shapes(a_local.shape, b.shape, world(comm))
    _check_out_meta("ag_gemm", "out", out, out_shape)
    _check_out_meta("ag_gemm", "gathered", gathered, gathered_shape)


@torch.library.custom_op("mkernel::gemm_rs_out", mutates_args=("out",))
def _gemm_rs_out_op(a: torch.Tensor, b: torch.Tensor, comm: int, out: torch.Tensor) -> None:
    a, b = dense16(a), dense16(b)
    _check_inputs("gemm_rs", ("a", a), ("b", b))
    _gemm_rs_run(a, b, comm, out)


@_gemm_rs_out_op.register_fake
def _(a, b, comm, out):
    _check_meta("gemm_rs", ("a", a), ("b", b))
    _check_out_meta("gemm_rs", "out", out, gemm_rs_shape(a.shape, b.shape, world(comm)))


@torch.library.custom_op("mkernel::all_gather_out", mutates_args=("out",))
def _all_gather_out_op(a_local: torch.Tensor, comm: int, out: torch.Tensor) -> None:
    a_local = dense16(a_local)
    _check_inputs("all_gather", ("a_local", a_local))
    _all_gather_run(a_local, comm, out)


@_all_gather_out_op.register_fake
def _(a_local, comm, out):
    _check_meta("all_gather", ("a_local", a_local))
    _check_out_meta("all_gather", "out", out, all_gather_shape(a_local.shape, world(comm)))


@torch.library.custom_op("mkernel::reduce_scatter_out", mutates_args=("out",))
def _reduce_scatter_out_op(x: torch.Tensor, comm: int, out: torch.Tensor) -> None:
    x = dense16(x)
    _check_inputs("reduce_scatter", ("x", x))
    _reduce_scatter_run(x, comm, out)


@_reduce_scatter_out_op.register_fake
def _(x, comm, out):
    _check_meta("reduce_scatter", ("x", x))
    _check_out_meta("reduce_scatter", "out", out, reduce_scatter_shape(x.shape, world(comm)))


# ---- autograd ------------------------------------------------------------------------------------
# W ranks; rank r holds the shards named _r; L = sum_r L_r(outputs of rank r).
# Every backward below is made of the custom ops above and torch ops, so
# AOTAutograd traces it; its collectives run in the same order on every rank
# because every rank runs the same graph. NOTES: a rank whose gradient for an
# output is missing while another rank's is not would skip a collective the
# others make (a device timeout): ranks must use their outputs alike.

def _ag_gemm_setup(ctx, inputs, output):
    a_local, b, key = inputs
    ctx.key, ctx.has_gathered = key, False
    ctx.save_for_backward(a_local, b)


def _ag_gemm_gathered_setup(ctx, inputs, output):
    _, b, key = inputs
    ctx.key, ctx.has_gathered = key, True
    ctx.save_for_backward(output[1], b)
    # An unused output's gradient arrives as None, not as a zero tensor (the
    # gathered output is often there only for the backward: no reduce-scatter of zeros).
    ctx.set_materialize_grads(False)


def _ag_gemm_backward(ctx, grad_out, grad_gathered=None):
    # Forward on rank r: out_r = G b_r^T, G = allgather_s(a_s) [M, k] (the same
    # on every rank), b_r [n_r, k] this rank's (column) shard of the weight.
    #  - L depends on G through every rank's out_s: dL/dG (on rank s) = grad_out_s b_s [M, k].
    #    a_r is rows r of G on every rank, so dL/da_r = rows r of sum_s grad_out_s b_s: the
    #    GEMM+ReduceScatter gemm_rs(grad_out [M, n_r], b_r^T [k, n_r]) -> [M / W, k].
    #    A gradient of the returned G adds rows r of sum_s grad_G_s: reduce_scatter(grad_G).
    #  - dL/db_r = grad_out_r^T G [n_r, k]: G saved from the forward (the gathered
    #    output), or gathered again when the forward did not keep it.
    saved, b = ctx.saved_tensors  # (G or a_local), b
    key = ctx.key
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    if grad_out is None:  # gathered op, only G used: zeros keep every rank's collectives alike
        grad_out = b.new_zeros((saved.shape[0], b.shape[0]))
    grad_out = grad_out.contiguous()
    grad_a = grad_b = None
    if need_a:
        grad_a = torch.ops.mkernel.gemm_rs(grad_out, b.t().contiguous(), key)
        if grad_gathered is not None:
            grad_a = grad_a + torch.ops.mkernel.reduce_scatter(grad_gathered.contiguous(), key)
    if need_b:
        gathered = saved if ctx.has_gathered else torch.ops.mkernel.all_gather(saved, key)
        grad_b = grad_out.t() @ gathered  # bf16 in, fp32 accumulation (torch's GEMM)
    return grad_a, grad_b, None


def _gemm_rs_setup(ctx, inputs, output):
    a, b, key = inputs
    ctx.key = key
    ctx.save_for_backward(a, b)


def _gemm_rs_backward(ctx, grad_out):
    # Forward on rank r: out_r = rows r of Y, Y = sum_s a_s b_s^T [M, n], a_s [M, k_s]
    # and b_s [n, k_s] rank s's (row-parallel) shards. Y feeds L only through the
    # row blocks, so dL/dY = allgather_r(grad_out_r) =: G [M, n], the same on every rank:
    #  - dL/da_r = G b_r [M, k_r]: the AllGather+GEMM ag_gemm(grad_out [M / W, n], b_r^T [k_r, n]).
    #  - dL/db_r = G^T a_r [n, k_r]: G from the same ag_gemm call (its gathered
    #    output), or all_gather alone when a needs no gradient.
    a, b = ctx.saved_tensors
    key = ctx.key
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    g = grad_out.contiguous()
    grad_a = grad_b = gathered = None
    if need_a and need_b:
        grad_a, gathered = torch.ops.mkernel.ag_gemm_gathered(g, b.t().contiguous(), key)
    elif need_a:
        grad_a = torch.ops.mkernel.ag_gemm(g, b.t().contiguous(), key)
    elif need_b:
        gathered = torch.ops.mkernel.all_gather(g, key)
    if need_b:
        grad_b = gathered.t() @ a  # bf16 in, fp32 accumulation (torch's GEMM)
    return grad_a, grad_b, None


def _key_setup(ctx, inputs, output):
    ctx.key = inputs[1]


def _all_gather_backward(ctx, grad):
    # out = allgather_s(a_s) on every rank, a_r is rows r of it everywhere:
    # dL/da_r = rows r of sum_s grad_s = reduce_scatter(grad).
    return torch.ops.mkernel.reduce_scatter(grad.contiguous(), ctx.key), None


def _reduce_scatter_backward(ctx, grad):
    # out_r = rows r of sum_s x_s: rank s's x_s reaches every row block once,
    # so dL/dx_s = allgather_r(grad_r), the same on every rank.
    return torch.ops.mkernel.all_gather(grad.contiguous(), ctx.key), None


_ag_gemm_op.register_autograd(_ag_gemm_backward, setup_context=_ag_gemm_setup)
_ag_gemm_gathered_op.register_autograd(_ag_gemm_backward, setup_context=_ag_gemm_gathered_setup)
_gemm_rs_op.register_autograd(_gemm_rs_backward, setup_context=_gemm_rs_setup)
_all_gather_op.register_autograd(_all_gather_backward, setup_context=_key_setup)
_reduce_scatter_op.register_autograd(_reduce_scatter_backward, setup_context=_key_setup)


# ---- public functions ----------------------------------------------------------------------------
# Through the dispatcher when tracing (torch.compile, dispatcher modes, tensor
# subclasses: ops.traced()) or when autograd must record the op; otherwise
# straight to the library.

def _grad(a, b=None):
    return torch.is_grad_enabled() and (a.requires_grad or (b is not None and b.requires_grad))


def _backward_fits(op, key, rows_grad):
    """ag_gemm's and all_gather's gradient of their rows is a reduce-scatter (gemm_rs / reduce_scatter), which
    takes at most MAX_RS_RANKS ranks: a call that will need it on more fails here, before its forward runs,
    not in the backward."""
    if rows_grad and world(key) > MAX_RS_RANKS:
        raise MkernelError(f"mkernel.{op}: the gradient of its input rows is a reduce-scatter over the {world(key)} "
                           f"ranks, which takes at most {MAX_RS_RANKS}; call it under torch.no_grad(), or with an "
                           "input that does not require grad")


def _no_grad_out(op, grad, out):
    if grad:
        raise MkernelError(f"mkernel.{op}: out= does not support autograd (inputs require grad); drop out=")
    out_grad_refused("mkernel." + op, out)


def _dispatch(op, run, args, grad, out):
    """One call of a tensor-parallel op: through the dispatcher (torch.ops.mkernel.<op>, or
    <op>_out with out=) when tracing (traced(): torch.compile, a dispatcher mode, a tensor subclass) or when
    autograd must record it, else straight to the
    library (`run`)."""
    compiling = traced("mkernel." + op, *args[:-1], out)  # (the last argument is the communicator's key)
    if out is not None:
        _no_grad_out(op, grad, out)
        if not compiling:
            run(*args, out)
            bump_version(out)
            return out
        getattr(torch.ops.mkernel, op + "_out")(*args, out)
        return out
    if grad or compiling:
        return getattr(torch.ops.mkernel, op)(*args)
    return run(*args)


def ag_gemm(a_local, b, comm, out=None, return_gathered=False):
    """allgather(a_local) @ b^T over the communicator's ranks: a_local [m_local, k], b [n, k]
    (this rank's shard, nn.Linear layout) -> [world * m_local, n]; with return_gathered,
    (out, gathered), gathered = allgather(a_local) [world * m_local, k].

    n and k multiples of 64.
    """
    if not return_gathered:
        hot = _hot("ag_gemm", comm, out, a_local, b)
        if hot is not None:
            return hot
    _check_inputs("ag_gemm", ("a_local", a_local), ("b", b))
    key = _key(comm)
    grad = _grad(a_local, b)
    _backward_fits("ag_gemm", key, grad and a_local.requires_grad)
    compiling = traced("mkernel.ag_gemm", a_local, b, out)
    if out is not None:
        _no_grad_out("ag_gemm", grad, out)
        gathered = (a_local.new_empty((world(key) * a_local.shape[0], a_local.shape[1])) if return_gathered
                    else None)  # (out is checked by the run)
        if not compiling:
            _ag_gemm_run(a_local, b, key, out, gathered)
            bump_version(out)
        elif gathered is None:
            torch.ops.mkernel.ag_gemm_out(a_local, b, key, out)
        else:
            torch.ops.mkernel.ag_gemm_gathered_out(a_local, b, key, out, gathered)
        return (out, gathered) if return_gathered else out
    if grad or compiling:
        # The backward of b needs the gathered a_local: kept from the forward.
        if return_gathered or (grad and b.requires_grad):
            out, gathered = torch.ops.mkernel.ag_gemm_gathered(a_local, b, key)
            return (out, gathered) if return_gathered else out
        return torch.ops.mkernel.ag_gemm(a_local, b, key)
    out, gathered = _ag_gemm_run(a_local, b, key, want_gathered=return_gathered)
    return (out, gathered) if return_gathered else out


def gemm_rs(a, b, comm, out=None):
    """This rank's rows of sum over ranks of a @ b^T: a [m, k_local], b [n, k_local] -> [m / world, n].

    n and k_local multiples of 64, m a multiple of the world (any rows per rank), at most 8 ranks.
    """
    hot = _hot("gemm_rs", comm, out, a, b)
    if hot is not None:
        return hot
    _check_inputs("gemm_rs", ("a", a), ("b", b))
    return _dispatch("gemm_rs", _gemm_rs_run, (a, b, _key(comm)), _grad(a, b), out)


def all_gather(a_local, comm, out=None):
    """allgather(a_local): a_local [m_local, k] bf16 -> [world * m_local, k] (k a multiple of 64)."""
    hot = _hot("all_gather", comm, out, a_local)
    if hot is not None:
        return hot
    _check_inputs("all_gather", ("a_local", a_local))
    key, grad = _key(comm), _grad(a_local)
    _backward_fits("all_gather", key, grad)
    return _dispatch("all_gather", _all_gather_run, (a_local, key), grad, out)


def reduce_scatter(x, comm, out=None):
    """This rank's rows of sum over ranks of x: x [m, n] bf16 -> [m / world, n].

    n a multiple of 64, m a multiple of the world (any rows per rank), at most 8 ranks.
    """
    hot = _hot("reduce_scatter", comm, out, x)
    if hot is not None:
        return hot
    _check_inputs("reduce_scatter", ("x", x))
    return _dispatch("reduce_scatter", _reduce_scatter_run, (x, _key(comm)), _grad(x), out)
