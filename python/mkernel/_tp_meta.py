"""The torch-free half of the tensor-parallel ops (mkernel/tp.py): the
communicator registry and the shape rules.

Torch custom ops take tensors and plain scalars, not Python objects, so the
ops name their communicator by an int key: its `_uid`, unique in the process,
stable for its life and carrying its world size (new_key). The registry maps
that key back to the communicator (weakly: it does not keep one alive) and
caches its world size, which the fake (meta) implementations need for output
shapes while torch.compile traces, without a call into the library. A communicator is
registered when it is created (and again by register(), e.g. after the
registry dropped a closed one); torch.compile'd code only looks keys up.

The shape rules give each op's output shape. What the library cannot see
(b's columns against a's: a Mismatch) they refuse everywhere; on a shape's
first call (no plan cached) the eager path first takes part in the plan
check with k -1, so that the other ranks, making that plan, fail at once
naming this rank instead of waiting for it (mkernel/_tp_plans.py's
refuse_mismatch). The size rules that the library's plan constructor
checks too (rows, multiples of 64, the split into row blocks) they refuse
in the fake implementations (tracing makes no plan),
but not in the eager path (sizes=False), which makes the plan next: that
check is collective, so a rank's bad size (say an uneven split left it no
rows) fails every rank at once, naming the rank; refused here, on that rank
alone, it left its peers waiting in the plan check for the bootstrap bound.
"""
import functools
import itertools
import weakref

from ._lib import MkernelError, check
from ._plan_cache import start_over_at

MAX_RS_RANKS = 8    # GemmRs, GemmAr: at most 8 ranks (include/mkernel/tp.hpp)

_COMMS = {}  # key -> (weakref to the communicator, world); an entry goes when its communicator does (_forget)

_KEY_COUNT = itertools.count(1)
KEY_WORLD_SPAN = 1 << 20  # above any world size


def new_key(world: int) -> int:
    """A fresh key (a communicator's `_uid`) for a communicator of `world` ranks: the n-th one made in
    this process gets n * KEY_WORLD_SPAN + world.

    torch.compile puts the key into the traced graph as a constant, and its on-disk caches (the FX
    graph and inductor caches, shared by every process of the machine) look compiled code up by the
    graph. The output shapes in that code come from the fake implementations, which read the world
    size: with the world size in the key, code traced at one world size is never reused at another
    (found 2026-12-01: a cached graph from a 4-rank run asserted 4-rank shapes in an 8-rank run).
    """
    world = int(world)
    if not 0 < world < KEY_WORLD_SPAN:
        raise MkernelError(f"mkernel: world size {world} out of range")
    return next(_KEY_COUNT) * KEY_WORLD_SPAN + world


def comm_handle(comm, op) -> object:
    """The library handle of `comm`, an open mkernel.Communicator (else MkernelError naming `op`): what the plans
    made by hand pass to the library, which would say only that it is NULL (or Python that it has no _h)."""
    h = getattr(comm, "_h", None)
    if not h:
        raise MkernelError(f"{op}: the communicator is closed (or is not a mkernel.Communicator)")
    return h


def register(comm) -> int:
    """Makes `comm` known to the tensor-parallel custom ops; returns its key.

    Communicators register themselves when created; eager calls of the ops
    register theirs again if needed.
    """
    comm_handle(comm, "mkernel")
    key = comm._uid
    entry = _COMMS.get(key)
    if entry is None or entry[0]() is not comm:
        _COMMS[key] = (weakref.ref(comm, functools.partial(_forget, key)), int(comm.world))
    return key


def _forget(key, ref, comms=_COMMS):
    """Drops `key`'s entry once the communicator that `ref` names is gone (its weakref's callback): a process
    that makes communicators over and over keeps no entry for each. Only that entry: `key` may name another
    object since (a test double's reused key). A missing key reads as a collected one (_entry)."""
    entry = comms.get(key)
    if entry is not None and entry[0] is ref:
        comms.pop(key, None)


def marked_call(obj, name, fn, *args):
    """check(fn(*args)), `obj` (a plan, or a communicator for its own calls) marked in flight as `name` meanwhile
    (its _in_call, which refuse_close_in_flight reads). The mark is set only where none is set and cleared only by
    the call that set it: another thread's call, which the library refuses as overlapping this one, neither clears
    this one's mark nor leaves its own behind (two threads that both find no mark may lose it early: the check is
    best-effort)."""
    mine = getattr(obj, "_in_call", None) is None
    if mine:
        obj._in_call = name
    try:
        check(fn(*args))
    finally:
        if mine:
            obj._in_call = None


def refuse_close_in_flight(op, comm, plans):
    """Raises MkernelError (a RuntimeError) when a call that `op` (a close) would pull the memory from under is in
    flight, as marked_call marks it: `comm` making a plan or in one of its own calls, or a plan of `plans` in a
    library call. Such a call is on another thread: one host thread at a time calls a communicator's ops and plans,
    and closes them. The calls pay only for setting and clearing that name; a close racing a call that has not set
    it yet is not seen."""
    for what in [getattr(comm, "_in_call", None)] + [getattr(p, "_in_call", None) for p in plans]:
        if what:
            raise MkernelError(f"{op}: {what} is in flight (in the library, called on another thread); closing now "
                               "would free what it uses. One host thread at a time calls a communicator's ops and "
                               "plans and closes them: close once that call returned")


def _entry(key):
    entry = _COMMS.get(int(key))
    comm = entry[0]() if entry is not None else None
    if comm is None:
        raise MkernelError(f"mkernel: no communicator with key {int(key)} is registered with the tensor-parallel "
                           "ops: the communicator it names was garbage-collected (code compiled with it, e.g. by "
                           "torch.compile, keeps only its key); keep the communicator alive as long as that code "
                           "runs, or compile again with a live one")
    return comm, entry[1]


def lookup(key):
    """The open communicator registered under `key` (MkernelError if none)."""
    comm, _ = _entry(key)
    if not getattr(comm, "_h", None):
        raise MkernelError(f"mkernel: communicator {int(key)} is closed")
    return comm


def world(key) -> int:
    """The world size of the communicator registered under `key`."""
    return _entry(key)[1]


def _mult64(op, what, v, sizes=True):
    if sizes and (v < 64 or v % 64):
        raise MkernelError(f"mkernel.{op}: {what} must be a positive multiple of 64 (got {v})")


def _rows_split(op, what, m, world, sizes=True):
    if sizes and (m < world or m % world):
        raise MkernelError(f"mkernel.{op}: {what} ({m}) must split into {world} equal row blocks (a multiple of "
                           f"the {world} ranks, at least one row each)")
    if world > MAX_RS_RANKS:  # (the same on every rank)
        raise MkernelError(f"mkernel.{op}: at most {MAX_RS_RANKS} ranks (got {world})")


class Mismatch(MkernelError):
    """A call's tensors refused against each other: b's columns against a's (_pair), ring attention's k and v against
    q and each other (mkernel/_attention.py's _validate, _ring_attention.py's _same_positions). A plan takes each size
    once and cannot see these: where the call's plan is not made yet, the eager paths send the refusal into its plan
    check (collective) first (mkernel/_tp_plans.py's refuse_mismatch). dim: the plan argument in question, given
    there as -1 (a class attribute: mismatch() raises the subclass of that dim; an __init__ of its own would stop
    torch.compile's tracing, which raises these too, with "Attempted to call a super() attribute")."""
    dim = None


def _dim_class(dim):
    return type(f"Mismatch_{dim}", (Mismatch,), {"dim": dim, "__module__": __name__})


_MISMATCH = {d: _dim_class(d) for d in ("k", "batch", "s_local", "kv_heads", "head_dim")}
globals().update({c.__name__: c for c in _MISMATCH.values()})  # (module attributes: pickle finds them by name)


def mismatch(msg, dim):
    """A Mismatch of plan argument `dim` (one of _MISMATCH's) saying msg."""
    return _MISMATCH[dim](msg)


def _pair(op, a_name, a_shape, b_shape):
    m, k = a_shape
    n, kb = b_shape
    if kb != k:  # (the library takes one k: it cannot see this)
        raise mismatch(f"mkernel.{op}: {a_name} is [{m}, {k}] but b is [{n}, {kb}]; b must be [n, {k}] "
                       "(torch.nn.Linear weight layout)", "k")
    return m, n, k


# sizes=False (the eager path): the size rules are left to the plan constructor, which checks them on every rank
# (the module docstring says why); the shapes are what the plan then gets.

def ag_gemm_shapes(a_shape, b_shape, world, sizes=True):
    """(out, gathered) shapes of ag_gemm: a_local [m_local, k], b [n, k]."""
    m_local, n, k = _pair("ag_gemm", "a_local", a_shape, b_shape)
    if sizes and m_local < 1:
        raise MkernelError(f"mkernel.ag_gemm: a_local must have at least one row (got {m_local})")
    _mult64("ag_gemm", "n (rows of b)", n, sizes)
    _mult64("ag_gemm", "k (columns of a_local and b)", k, sizes)
    return (world * m_local, n), (world * m_local, k)


def gemm_rs_shape(a_shape, b_shape, world, sizes=True):
    """Output shape of gemm_rs: a [m, k_local], b [n, k_local] -> [m / world, n]."""
    m, n, k = _pair("gemm_rs", "a", a_shape, b_shape)
    _mult64("gemm_rs", "n (rows of b)", n, sizes)
    _mult64("gemm_rs", "k_local (columns of a and b)", k, sizes)
    _rows_split("gemm_rs", "m (rows of a)", m, world, sizes)
    return (m // world, n)


def all_gather_shape(a_shape, world, sizes=True):
    """Output shape of all_gather: a_local [m_local, k] -> [world * m_local, k]."""
    m_local, k = a_shape
    if sizes and m_local < 1:
        raise MkernelError(f"mkernel.all_gather: a_local must have at least one row (got {m_local})")
    _mult64("all_gather", "k (columns of a_local)", k, sizes)
    return (world * m_local, k)


def reduce_scatter_shape(x_shape, world, sizes=True):
    """Output shape of reduce_scatter: x [m, n] -> [m / world, n]."""
    m, n = x_shape
    _mult64("reduce_scatter", "n (columns of x)", n, sizes)
    _rows_split("reduce_scatter", "m (rows of x)", m, world, sizes)
    return (m // world, n)


def gemm_ar_shape(a_shape, b_shape, world, sizes=True):
    """Output shape of gemm_ar: a [m, k_local], b [n, k_local] -> [m, n] (on every rank)."""
    m, n, k = _pair("gemm_ar", "a", a_shape, b_shape)
    _mult64("gemm_ar", "n (rows of b)", n, sizes)
    _mult64("gemm_ar", "k_local (columns of a and b)", k, sizes)
    _rows_split("gemm_ar", "m (rows of a)", m, world, sizes)
    return (m, n)


def all_reduce_shape(x_shape, world, sizes=True):
    """Output shape of all_reduce: x [m, n] -> [m, n] (on every rank)."""
    m, n = x_shape
    _mult64("all_reduce", "n (columns of x)", n, sizes)
    _rows_split("all_reduce", "m (rows of x)", m, world, sizes)
    return (m, n)


# A shape rule's result per (rule, shapes, world), for the ops' steady-state calls (~1 dict lookup instead of the
# rules; python_overhead.py measures the call). The rules' size checks are left to the plan (sizes=False).
_SHAPES = {}


def cached_shape(rule, *args):
    key = (rule, *args)
    shape = _SHAPES.get(key)
    if shape is None:
        start_over_at(_SHAPES)  # many distinct shapes (varying token counts), as _attention's _SEEN
        shape = _SHAPES[key] = rule(*args, sizes=False)
    return shape
