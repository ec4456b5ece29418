"""Ring attention (sequence parallel) on torch tensors (include/mkernel/ring_attention.hpp):

    out, lse = mkernel.ring_attention(q, k, v, comm, causal=True)

Per rank: q [batch, s_local, heads, head_dim], k and v [batch, s_local, kv_heads, head_dim] (bf16,
contiguous); returns out (bf16, q's shape) and lse [batch, heads, s_local] (fp32) for this rank's
queries over the whole sequence. Causal calls (causal a bool) take zigzag shards (mkernel.zigzag_shard: s_local
even); scale None for 1/sqrt(head_dim), else a finite number > 0; out / lse share no memory with q, k, v. One
persistent kernel per call; plans are cached per (communicator, shape, causal, scale) and made
collectively on first use (every rank calls with the same shapes). Forward only (no autograd).
Registered as the torch custom op mkernel::ring_attention (the communicator as its registry key)
with a fake implementation, so torch.compile traces it; eager calls go straight to the library.
"""
import ctypes

import torch
from . import _torch_req  # noqa: F401  (torch >= 2.4: a clear ImportError before the custom ops' decorators)

from ._lib import MkernelError, c_int_arg, lib
from ._ops_c import _need
from ._attention import (_check, _check_lse, _check_out, _fast_io, _no_autograd, _validate, causal_arg, into,
                         plain_args, scale_arg)
from .ops import (_get_device, _stream, bump_version, dense16, has_address, modes_on, out_grad_refused,
                  recording_mode, traced)
from ._tp_meta import Mismatch, comm_handle, marked_call, mismatch
from ._tp_plans import REFUSED, _Plan, _device_check, check_aligned, check_apart, plan_ints, refuse_mismatch
from .tp import _HOT, _PLANS, _compiling, _key, _plan, lookup

__all__ = ["ring_attention", "RingAttention"]

# device/trace.hpp's event kinds (RingAttention.read_trace)
TRACE_KINDS = {1: "cta_start", 2: "cta_end", 3: "wait_begin", 4: "wait_end", 5: "push_done", 6: "own_ready",
               7: "put_posted", 8: "quiet_done", 9: "put_claimed", 10: "put_room", 11: "put_body"}


class RingAttention(_Plan):
    """out, lse = attention of this rank's queries over every rank's keys; one persistent kernel. kv_heads 0 means
    heads; scale None means 1/sqrt(head_dim), else a finite number > 0 in float32 (0 is refused, as by the op:
    torch's scale=0 means uniform weights); num_comm_ctas / num_ctas 0: the library's choice. No backward: run()
    refuses inputs that require grad while autograd records (mkernel.ring_attention has none either)."""
    _destroy = "mk_ring_attn_destroy"
    _captured = "mk_ring_attn_captured"

    def __init__(self, comm, batch, s_local, heads, kv_heads, head_dim, causal, scale=None, num_comm_ctas=0,
                 num_ctas=0):
        op = "mkernel.RingAttention"
        ch = comm_handle(comm, op)
        sc = scale_arg(scale, op)  # (None -> 0.0, the library's default)
        batch, s_local, heads, kv_heads, head_dim, num_comm_ctas, num_ctas = plan_ints(
            op, dict(batch=batch, s_local=s_local, heads=heads, kv_heads=kv_heads, head_dim=head_dim),
            dict(num_comm_ctas=num_comm_ctas, num_ctas=num_ctas))
        h = ctypes.c_void_p()
        marked_call(comm, f"making the plan of {op}", _need("mk_ring_attn_create", "ring_attention"), ch, batch,
                    s_local, heads, kv_heads, head_dim, int(causal_arg(causal, op)), sc, num_comm_ctas, num_ctas,
                    ctypes.byref(h))
        self._bind(comm, h)
        self.world = comm.world
        self.shape = (batch, s_local, heads, kv_heads or heads, head_dim)  # 0: heads
        self.causal = bool(causal)

    def run(self, q, k, v, out=None, lse=None):
        b, s, h, hkv, d = self.shape
        self._open(q, "q")
        op = "mkernel.RingAttention.run"
        out_grad_refused(op, out, lse)
        for name, t in (("q", q), ("k", k), ("v", v)):  # (what the shape comparison below reads: tensors)
            _check(t, name, meta=True, op=op)
        if tuple(q.shape) != (b, s, h, d) or tuple(k.shape) != (b, s, hkv, d):
            raise MkernelError(f"{op}: the plan is for q {(b, s, h, d)}, k/v {(b, s, hkv, d)}; "
                               f"got q {tuple(q.shape)}, k {tuple(k.shape)}")
        # A plan's run launches at once, under a TorchDispatchMode too (FlopCounterMode, a memory tracker): its
        # tensors are checked as in eager mode wherever they have addresses (traced() alone is true under any
        # mode, which skipped the alignment and overlap checks: the library then refused on this rank alone).
        # traced() also refuses a forward-AD tangent.
        is_traced = (traced(op, q, k, v, out, lse)
                     and not all(has_address(t) for t in (q, k, v, out, lse) if isinstance(t, torch.Tensor)))
        _check_call(q, k, v, out, lse, self._device, is_traced, op)
        _no_autograd(q, k, v, op)
        res = self._launch(q, k, v, out, lse)
        bump_version(out, lse)
        return res

    def enable_trace(self, events_per_cta):
        """Diagnostics: record up to events_per_cta device events per CTA of every later run (0: off; at most
        2**20, an int)."""
        h = self._handle()
        cap = c_int_arg(events_per_cta, "events_per_cta", "mkernel.RingAttention.enable_trace", 0, 1 << 20)
        self._lib_call("mkernel.RingAttention.enable_trace", lib.mk_ring_attn_trace, h, cap)
        self._trace_cap = cap

    def read_trace(self):
        """The last run's device events (waits for the device): a list of (cta, kind, arg, t_ns); kind as in
        device/trace.hpp (TRACE_KINDS)."""
        h = self._handle()
        # At most events_per_cta per CTA, and a plan has at most one CTA per SM: one call reads them all.
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        cap = getattr(self, "_trace_cap", 0) * sms
        buf = (ctypes.c_uint64 * (4 * max(cap, 1)))()
        n = ctypes.c_int64(0)
        self._lib_call("mkernel.RingAttention.read_trace", lib.mk_ring_attn_read_trace, h, buf, cap, ctypes.byref(n))
        return [tuple(buf[4 * i:4 * i + 4]) for i in range(min(n.value, cap))]

    def _launch(self, q, k, v, out, lse):  # checked by the caller
        if out is None:
            out = torch.empty_like(q)
        if lse is None:
            lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
        self._lib_call("mkernel.RingAttention.run", lib.mk_ring_attn_run, self._h, q.data_ptr(), k.data_ptr(),
                       v.data_ptr(), out.data_ptr(), lse.data_ptr(), _stream(q.get_device()))
        return out, lse


def _same_positions(q, k, op="mkernel.ring_attention"):
    """The ring op's K/V shard covers this rank's positions, as its Q shard does (the one-GPU op allows other
    key lengths; the library takes k and v as s_local rows long)."""
    if k.shape[1] != q.shape[1]:
        raise mismatch(f"{op}: k and v hold {k.shape[1]} positions per sequence and q "
                       f"{q.shape[1]}: each rank's K/V shard must cover the same positions as its Q shard "
                       f"(s_local rows; causal: zigzag_shard of each)", "s_local")


def _zigzag_even(q, causal):
    if causal and q.shape[1] % 2:
        raise MkernelError(f"mkernel.ring_attention: causal calls take zigzag shards (two chunks per rank): s_local "
                           f"must be even (got q {tuple(q.shape)})")


def _check_call(q, k, v, out, lse, comm_device, is_traced=None, op="mkernel.ring_attention"):
    """The full path's checks of a call, before any plan is made (making one is collective): what the plan
    cannot see (q, k and v against each other; q's device, the current one and the communicator's, comm_device,
    None where not known; alignment; out / lse apart from q, k, v). A steady-state call (_hot) checks dtype,
    device, layout, shapes, alignment and overlaps in one pass (_fast_io), and takes this path for anything it
    does not pass. is_traced: the caller's traced() of this call, where it has it (None: taken here). op: the
    call said in errors. q, k and v against each other raise a Mismatch first: the op's callers send it into the
    plan check on a shape's first call (_refuse); a plan's run, whose plan is made, raises it."""
    # The sizes the plan constructor checks on every rank (head_dim, empty shards, kv_heads >= 1 and dividing heads,
    # a causal s_local even) are left to it: one rank's bad size fails every rank at once, naming it.
    _validate(q, k, v, sizes=False, op=op)
    _same_positions(q, k, op)  # (the plan takes one s_local: it cannot see this)
    if is_traced is None:
        is_traced = traced(op, q, k, v, out, lse)
    if not is_traced:
        _device_check(q, "q", comm_device, op)
    if out is not None:
        _check_out(out, q, op)
    if lse is not None:
        _check_lse(lse, (q.shape[0], q.shape[2], q.shape[1]), q.device, op)
    if not is_traced:
        for name, t in (("q", q), ("k", k), ("v", v), ("out", out), ("lse", lse)):
            if t is not None:
                check_aligned(t, name, op)
        inputs = (("q", q), ("k", k), ("v", v))
        check_apart(op, "out", out, *inputs)
        check_apart(op, "lse", lse, *inputs, ("out", out))


# What the op's plan is told for k and v with no kv heads: the plan reads kv_heads 0 as heads (RingAttention's
# default), so 0 would pass its check, and this rank's run would then read an empty k as [.., heads, ..]. Any
# value below 1 fails the plan check (batch, sizes and head counts >= 1), which is collective: where every rank
# makes this plan (the shape's first call), every rank fails at once, naming this one and kv_heads; refused before
# it, on this rank alone, the others waited in the plan check until the bootstrap bound. (Ranks that already hold
# a plan for their own shape do not enter the check: they wait in the kernel until MK_TIMEOUT_MS, as for any
# shape that differs between ranks.) q, k and v that do not match each other take the same way: _refuse.
_NO_KV_HEADS = -1


def _plan_shape(b, s, h, kv, d, causal, scale):
    """RingAttention's arguments (and its cache key's shape) for a call of these sizes: kv 0 as _NO_KV_HEADS, the
    scale 0.0 as None (the default)."""
    return b, s, h, kv or _NO_KV_HEADS, d, bool(causal), float(scale) or None


def _refuse(err, q, k, v, key, causal, scale):
    """Raises err, a Mismatch of q, k, v (_check_call), through the plan check where the plan the call means is not
    made yet (mkernel/_tp_plans.py's refuse_mismatch): the one shaped by q with k's kv heads, or by k or v with q's
    heads. The check is given err.dim (k's and v's dimension in question, as the plan names it) as REFUSED."""
    b, s, h, d = q.shape
    said = [_plan_shape(b, s, h, k.shape[2], d, causal, scale)]
    said += [_plan_shape(t.shape[0], t.shape[1], h, t.shape[2], t.shape[3], causal, scale) for t in (k, v)]
    sent = dict(batch=b, s_local=s, kv_heads=k.shape[2] or _NO_KV_HEADS, head_dim=d)
    sent[err.dim if err.dim in sent else "kv_heads"] = REFUSED
    refuse_mismatch(err, _plan, _PLANS, RingAttention, key, said,
                    _plan_shape(sent["batch"], sent["s_local"], h, sent["kv_heads"], sent["head_dim"], causal, scale))


def _runs_now(q, k, v):
    """Whether a traced call (traced()) still runs the op's implementation at once, making its plan: real tensors
    under a dispatcher mode that records no graph (FlopCounterMode, a memory tracker); not torch.compile's tracing,
    make_fx, fake tensors, a tensor subclass or a torch.func transform."""
    return not _compiling() and recording_mode() is None and all(has_address(t) for t in (q, k, v))


def _run(q, k, v, key, causal, scale, out=None, lse=None):  # q, k, v, out, lse checked (_check_call)
    _device_check(q, "q", getattr(lookup(key), "_device", None))  # (both paths: eager and the custom op)
    b, s, h, d = q.shape
    kv = k.shape[2]
    try:
        plan = _plan(RingAttention, key, *_plan_shape(b, s, h, kv, d, causal, scale))
    except MkernelError as e:
        if kv:
            raise
        raise MkernelError(f"mkernel.ring_attention: k and v have no kv heads (k {tuple(k.shape)}); kv_heads must be "
                           f">= 1 (the plan, which reads 0 as heads, was given {_NO_KV_HEADS}): {e}") from e
    res = plan._launch(q, k, v, out, lse)
    if not _compiling():
        _HOT[("ring_attention", key, q.shape, k.shape, v.shape, bool(causal), float(scale))] = plan._launch
    return res


# Steady-state calls (as mkernel/tp.py's _hot, whose table holds the entries
# and is cleared with the plans): a call that repeats an earlier one's
# communicator, shapes, mask and scale, outside tracing, takes one combined
# check of dtype, device, layout, alignment and overlaps and the cached
# plan's launch; anything else (None) takes the full path.
def _hot(q, k, v, comm, causal, scale, out, lse):
    if modes_on() or not plain_args(causal, scale):  # (first: torch.compile traces none of what follows)
        return None
    try:
        qs = q.shape
        launch = _HOT[("ring_attention", comm._uid, qs, k.shape, v.shape, causal, 0.0 if scale is None else scale)]
        if not comm._h:
            return None
        comm_dev = comm._device
    except (KeyError, AttributeError, TypeError, ValueError):
        return None
    dev = _get_device()
    if dev != comm_dev or not _fast_io(q, k, v, out, lse, dev, qs):
        return None
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                                    or (out is not None and out.requires_grad)
                                    or (lse is not None and lse.requires_grad)):
        return None  # (the full path refuses it: _no_autograd, out_grad_refused)
    res = launch(q, k, v, out, lse)
    if out is not None or lse is not None:
        bump_version(out, lse)
    return res


@torch.library.custom_op("mkernel::ring_attention", mutates_args=())
def _ring_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, comm: int, causal: bool = False,
                       scale: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, v = dense16(q), dense16(k), dense16(v)  # any layout and start from torch.compile's code
    try:
        _check_call(q, k, v, None, None, getattr(lookup(comm), "_device", None))
    except Mismatch as e:
        _refuse(e, q, k, v, comm, causal, scale)
    return _run(q, k, v, comm, causal, scale)


@_ring_attention_op.register_fake
def _(q, k, v, comm, causal=False, scale=0.0):
    lookup(comm)  # a key that names no communicator fails at trace time
    _validate(q, k, v, meta=True, op="mkernel.ring_attention")  # so do bad shapes
    _same_positions(q, k)
    _zigzag_even(q, causal)
    return q.new_empty(q.shape), q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


def ring_attention(q, k, v, comm, causal=False, scale=None, out=None, lse=None):
    """See the module docstring. Errors raise MkernelError."""
    hot = _hot(q, k, v, comm, causal, scale, out, lse)
    if hot is not None:
        return hot
    op = "mkernel.ring_attention"
    causal, scale = causal_arg(causal, op), scale_arg(scale, op)
    is_traced = traced(op, q, k, v, out, lse)
    try:
        _check_call(q, k, v, out, lse, getattr(comm, "_device", None), is_traced)
    except Mismatch as e:
        if not is_traced or _runs_now(q, k, v):  # (a call that makes its plan now: not one traced into a graph)
            _refuse(e, q, k, v, _key(comm), causal, scale)
        raise
    _no_autograd(q, k, v, op)
    out_grad_refused(op, out, lse)
    if is_traced:
        return into(torch.ops.mkernel.ring_attention(q, k, v, _key(comm), causal, scale), out, lse)
    key = _key(comm)
    res = _run(q, k, v, key, causal, scale, out, lse)
    if out is not None or lse is not None:
        bump_version(out, lse)
    return res
