"""The base of the plans made by hand (_Plan: mkernel.AgGemm and GemmRs in mkernel/tp.py, GemmAr in tp_ar.py,
RingAttention in _ring_attention.py) and the tensor checks they share with the ops. A plan is made
collectively on a communicator and closed collectively, by close() or by the communicator's close(). Also the ops'
refusal of tensors that do not match each other, through the plan check on a shape's first call (refuse_mismatch)."""
import ctypes
import warnings

import torch

from ._lib import MkernelError, c_int_arg, check, lib, outside_stacklevel, path
from ._tp_meta import marked_call, refuse_close_in_flight
from .ops import _check_matrix, _fast_apart, _get_device, aligned16, has_address, recording_mode


def _ptr(t):
    return t.data_ptr() if t is not None else None


class _Plan:
    _destroy = None  # C symbols
    _captured = None
    _warned_old = False  # a library without the _captured symbol was said once
    # The launch in the library now ("mkernel.GemmAr.run"), else None: each _launch method's library call goes
    # through _lib_call, which sets it around the call, and a close refuses while it is set (refuse_close_in_flight).
    _in_call = None

    # self._lib_call(name, fn, *args): check(fn(*args)), marked in flight as `name` meanwhile (mkernel/_tp_meta.py's
    # marked_call, bound as the method itself: the steady-state launches pay no extra Python call)
    _lib_call = marked_call

    @property
    def captured(self):
        """Whether a launch of this plan was ever captured in a CUDA graph: replaying that graph uses the
        plan's memory, so the plan must outlive it (the bounded plan cache, MK_PLAN_CACHE_MAX, keeps such a
        plan while a graph on some rank holds it: graphs_alive). The same on every rank that captures the
        same graphs. False once closed."""
        return self._capture_state() != 0

    @property
    def graphs_alive(self):
        """Whether a CUDA graph holding a captured launch of this plan (the graph, an executable graph made
        from it, a clone, a child-graph node) still exists or runs; false a moment after the last one is
        destroyed (torch.cuda.CUDAGraph: when the object goes). This rank's answer only. False once closed."""
        return self._capture_state() == 1

    def _capture_state(self):
        """The library's mk_*_captured: 0 never captured, 1 held by a graph, 2 captured, every graph gone (a
        library before 2026-12-07 says 1 for both of the latter)."""
        if not getattr(self, "_h", None):
            return 0
        fn = getattr(lib, self._captured, None)
        if fn is None:  # the plan was made, so the op is in the library: an older build
            if not _Plan._warned_old:
                _Plan._warned_old = True
                warnings.warn(f"mkernel: {path} has no {self._captured}: the library is older than this package, "
                              "and plans are taken as never captured in a CUDA graph (MK_PLAN_CACHE_MAX may close "
                              "one a graph still uses); rebuild it (tools/build.sh)", RuntimeWarning,
                              stacklevel=outside_stacklevel())
            return 0
        v = ctypes.c_int()
        self._lib_call(f"mkernel.{type(self).__name__}.captured", fn, self._h, ctypes.byref(v))
        return v.value

    def close(self):
        """Collective: every rank closes its plan (frees its symmetric memory)."""
        if getattr(self, "_h", None):
            refuse_close_in_flight(f"mkernel.{type(self).__name__}.close", None, [self])
            check(getattr(lib, self._destroy)(self._h))
            self._h = None

    def _bind(self, comm, h):
        """Keeps the plan's handle, and the plan known to `comm`, whose close() closes it first (the C++
        plan refers to its communicator: one used after the communicator went would use freed memory)."""
        self._h, self._comm, self._device = h, comm, getattr(comm, "_device", None)
        plans = getattr(comm, "_explicit_plans", None)
        if plans is not None:  # strong references: closing is collective, so every rank must close the plans
            # it made, in the order it made them, whether or not its Python objects are still alive
            if len(plans) >= 64 and len(plans) % 64 == 0:  # the closed ones go (the cache's, closed by close_plans)
                plans[:] = [p for p in plans if p._h]
            plans.append(self)

    def _handle(self):
        """The plan's handle; a clear error once it was closed (the library would say only that it is NULL)."""
        h = getattr(self, "_h", None)
        if not h:
            raise MkernelError(f"mkernel.{type(self).__name__}: the plan is closed (close(), or its communicator "
                               "was closed)")
        return h

    def _open(self, t, name):
        """A public run()'s first check: the plan is open, no tracing mode would leave its launch out of the graph
        it records, and `t` is on its communicator's device."""
        self._handle()
        mode = recording_mode()
        if mode:
            raise MkernelError(f"mkernel.{type(self).__name__}: a plan made by hand launches at once through the "
                               f"library, which the graph being traced ({mode}: make_fx, torch.export) would not "
                               "record; trace the functional ops instead (mkernel.ag_gemm, gemm_rs, gemm_ar, "
                               "all_gather, reduce_scatter, all_reduce, ring_attention: torch custom ops)")
        if isinstance(t, torch.Tensor) and t.is_cuda:  # (anything else: the shape check says what is wrong)
            _device_check(t, name, self._device)


def _check_shape(t, name, shape, device=None, *, op):
    _check_matrix(t, name, device, op=op)
    if tuple(t.shape) != tuple(shape) or not t.is_contiguous():
        raise MkernelError(f"{op}: {name} must be a contiguous {list(shape)} tensor (got {list(t.shape)}, "
                           f"strides {t.stride()})")
    _device_check(t, name, op=op)
    check_aligned(t, name, op)


def check_aligned(t, name, op):
    """The library takes 16-byte aligned operands: said here, before a plan is made (collective), not by the
    library at launch on this rank alone after the others went ahead."""
    if not aligned16(t):
        at = f"{t.data_ptr():#x}: " if has_address(t) else ""
        raise MkernelError(f"{op}: {name} must start at a 16-byte aligned address (got {at}a view at storage "
                           f"offset {t.storage_offset()}); call .clone()")


def check_apart(op, out_name, out, *named, same_ok=False):
    """out's bytes share none with any (name, tensor) of `named` (None: skipped): the library writes out while
    it reads them, and refuses an overlap at launch on this rank alone, after a new shape's plan was made
    (collective). same_ok: out may be the very same memory as an input of its size (an in-place all_reduce).
    Contiguous tensors with addresses only (the callers checked them; traced ones are skipped)."""
    if out is None or not has_address(out):
        return
    for name, t in named:
        if t is None or not has_address(t):
            continue
        if not _fast_apart(out, t, same_ok=same_ok):  # (the fast paths' test, one input at a time: named)
            raise MkernelError(f"{op}: {out_name} overlaps {name} in memory ({out_name} is written while {name} "
                               "is read" + ("; in place, the very same tensor, is allowed" if same_ok else "")
                               + "); pass a separate tensor")


def _device_check(t, name, comm_device=None, op="mkernel"):
    """`t` is on the current device, and that is the communicator's (`comm_device`; None: not known)."""
    cur = _get_device()
    if t.get_device() != cur or (comm_device is not None and cur != comm_device):
        raise MkernelError(f"{op}: {name} is on cuda:{t.get_device()} and the current device is cuda:{cur}"
                           + (f"; the communicator's is cuda:{comm_device}" if comm_device is not None else "")
                           + ": run the ops with the communicator's device current (torch.cuda.set_device) and "
                           "their tensors on it")


def plan_ints(op, dims, ctas):
    """A plan constructor's arguments as the library takes them, refused before the call where ctypes would wrap or
    truncate them without a word (2**32 + 4 CTAs arriving as 4, m_local = 0.5 as 0): `dims` (name -> value) as
    int64s, `ctas` (name -> value) as C ints (0: the default). Their values (m_local >= 1, n a multiple of 64, CTA
    counts in range, ...) are the library's to check: its plan constructor checks them on every rank at once, so a
    rank's bad value (an uneven split that left it no rows) fails every rank, naming it; refused here, on that
    rank alone, it left the others waiting for it in the plan check until the bootstrap bound."""
    return ([c_int_arg(v, name, op, -(1 << 63), (1 << 63) - 1) for name, v in dims.items()]
            + [c_int_arg(v, name, op) for name, v in ctas.items()])


# The size a plan is given in place of one this rank refused (refuse_mismatch): every plan constructor refuses it.
REFUSED = -1


def refuse_mismatch(err, plan, plans, cls, key, said, sent):
    """Raises err, this rank's refusal of a call's tensors against each other (a Mismatch: b's columns against a's,
    ring attention's k / v against q: what a plan cannot see), after taking part in the plan check where the call's
    plan is not made yet. said: the shapes of cls's plan that the call may mean (one from each of its tensors).
    Where none is in `plans` (the op's cache) for communicator `key`, the other ranks (the same calls, in the same
    order) make that plan now, and its check is collective: refused here alone, they waited in it for this rank
    until the bootstrap bound (MK_BOOTSTRAP_TIMEOUT_MS, 60 s). So this rank makes it too, through `plan` (the
    caller's plan cache), with `sent`, the shape with REFUSED for the size in question: the check fails on every
    rank at once, naming this rank, and err follows here, that error chained (its __cause__). Where one is cached,
    the others make none (they launch, and wait in the kernel until MK_TIMEOUT_MS, as for any call refused on one
    rank): err is raised at once. Only the full path's error branch calls it: steady-state calls pay nothing."""
    if not any((cls.__name__, key, s) in plans for s in said):
        try:
            plan(cls, key, *sent)
        except MkernelError as e:
            raise err from e
    raise err


def refuse_pair(err, plan, plans, cls, key, a, b):
    """refuse_mismatch for b's columns against a's (mkernel/_tp_meta.py's _pair) in an op whose plan is
    cls(m, n, k), k taken from a or from b; the plan check is given k = REFUSED."""
    (m, k), (n, kb) = a.shape, b.shape
    refuse_mismatch(err, plan, plans, cls, key, [(m, n, k), (m, n, kb)], (m, n, REFUSED))
