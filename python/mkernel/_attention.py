"""Attention on torch tensors (one GPU), on the current CUDA stream.

    out, lse = mkernel.attention(q, k, v, causal=False)

q [batch, seq_q, heads, head_dim], k and v [batch, seq_kv, kv_heads, head_dim],
bf16, contiguous (FlashAttention's layout); head_dim 64 or 128; kv_heads
divides heads (grouped-query attention). Returns out (bf16, q's shape) and
lse [batch, heads, seq_q] (fp32, natural log). causal is bottom-right aligned
(query i sees keys j <= i + seq_kv - seq_q); causal a bool. scale: None for
1/sqrt(head_dim), else a finite number > 0. Registered as the torch custom op mkernel::attention with a
fake implementation (torch.compile traces it); no autograd (forward only).
"""
import ctypes
import numbers

import torch
from . import _torch_req  # noqa: F401  (torch >= 2.4: a clear ImportError before the custom ops' decorators)

from ._lib import MkernelError, check
from ._ops_c import _need
from ._tp_meta import mismatch

from ._lib import lib
from .ops import (_capturing, _fast_apart, _fast_ok, _get_device, _stream, bump_version, capture_workspace, dense16,
                  inputs_grad_refused, modes_on, out_grad_refused, traced)

_BF16 = torch.bfloat16
_mk_attention = getattr(lib, "mk_attention_fwd", None)  # None: built without the op (_need says so)


def _check(t, name, dev=None, meta=False, op="mkernel.attention"):
    """meta: a fake (traced) call: the device checks are left to the real call. op: the call said in errors."""
    if not isinstance(t, torch.Tensor):
        raise MkernelError(f"{op}: {name} must be a torch.Tensor (got {type(t).__name__})")
    if t.dtype != _BF16:
        raise MkernelError(f"{op}: {name} must be bfloat16 (got {t.dtype})")
    if not meta and not t.is_cuda:
        raise MkernelError(f"{op}: {name} must be on a CUDA device (got {t.device})")
    if not meta and dev is not None and t.device != dev:
        raise MkernelError(f"{op}: {name} is on {t.device}, q on {dev}")
    if t.dim() != 4:
        raise MkernelError(f"{op}: {name} must be 4-D [batch, seq, heads, head_dim] "
                           f"(got shape {tuple(t.shape)})")
    if not meta and not t.is_contiguous():  # the custom ops make their inputs contiguous
        raise MkernelError(f"{op}: {name} must be contiguous; call .contiguous()")


# k's and v's dimensions as ring attention's plan names them (a Mismatch's dim: the one its plan check is given as -1)
_KV_DIMS = ("batch", "s_local", "kv_heads", "head_dim")


def _validate(q, k, v, meta=False, sizes=True, op="mkernel.attention"):
    """Every rule of a call's q, k, v (meta: a fake call's, without the device checks). sizes=False (ring
    attention's real call): the size rules that its plan constructor checks on every rank at once (head_dim,
    dimensions >= 1, kv_heads dividing heads) are left to it, so that one rank's bad size (an empty shard) fails
    every rank, naming it, instead of this rank alone while the others wait for it in the plan check. k and v
    against q and each other, which no plan sees, raise a Mismatch (ring attention's op sends it into its plan
    check first on a shape's first call). op: the call said in errors (ring attention names its own)."""
    _check(q, "q", meta=meta, op=op)
    _check(k, "k", q.device, meta, op)
    _check(v, "v", q.device, meta, op)
    b, sq, h, d = q.shape
    if k.shape != v.shape:
        dim = "kv_heads"
        for i in range(4):
            if k.shape[i] != v.shape[i]:
                dim = _KV_DIMS[i]
                break
        raise mismatch(f"{op}: k {tuple(k.shape)} and v {tuple(v.shape)} differ", dim)
    if k.shape[0] != b or k.shape[3] != d:
        raise mismatch(f"{op}: k is {tuple(k.shape)}; it must be [{b}, seq_kv, kv_heads, {d}] "
                       f"for q {tuple(q.shape)}", "batch" if k.shape[0] != b else "head_dim")
    if not sizes:  # (kv_heads 0 too: ring attention sends it to its plan as -1, as 0 means heads there)
        return
    if d not in (64, 128):
        raise MkernelError(f"{op}: head_dim must be 64 or 128 (got {d})")
    if 0 in q.shape or 0 in k.shape:
        raise MkernelError(f"{op}: empty tensors (q {tuple(q.shape)}, k {tuple(k.shape)}); "
                           "every dimension must be >= 1")
    if h % k.shape[2]:
        raise MkernelError(f"{op}: kv_heads ({k.shape[2]}) must divide heads ({h})")


_INF = float("inf")
_LOG2E = 1.4426950408889634  # the kernels scale scores by scale log2(e) (base-2 softmax)


def _type_name(x):
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def causal_arg(causal, op):
    """causal as the library takes it: a Python bool, as torch's is_causal (0.5 or "False" would be read
    silently as one or the other; the custom op's schema refuses them too)."""
    if causal is True or causal is False:
        return causal
    raise MkernelError(f"{op}: causal must be a Python bool (got {_type_name(causal)} {causal!r})")


def _f32_ok(v):
    """0 < v < inf as the library's float32 reads it (1e-46 would round to 0, the library's default; 1e39 to
    inf), and v log2(e) finite too: the kernels' softmax works in base 2 (3e38 would make it inf, every output
    NaN)."""
    f = ctypes.c_float(v).value
    return 0.0 < f < _INF and ctypes.c_float(f * _LOG2E).value < _INF


def scale_arg(scale, op):
    """scale as the library takes it: None -> 0.0 (the library's 1/sqrt(head_dim)); else a finite real > 0 in
    float32 (a Python or numpy number, or a 0-d real tensor, as torch's SDPA takes). 0 would read as the
    default (torch's scale=0 means uniform weights) and the kernel's softmax takes a positive scale."""
    if scale is None:
        return 0.0
    v = None
    if isinstance(scale, torch.Tensor):
        if scale.dim() == 0 and not scale.is_complex() and scale.dtype is not torch.bool:
            v = float(scale)  # (a tensor on a GPU: a copy to the host, as any float() of it)
    elif isinstance(scale, numbers.Real) and not isinstance(scale, bool):
        v = float(scale)
    if v is None or not _f32_ok(v):
        raise MkernelError(f"{op}: scale must be a finite number > 0 (in float32), or None for 1/sqrt(head_dim) "
                           f"(got {_type_name(scale)} {scale!r})")
    return v


# The fast paths' bounds on a float scale, within _f32_ok's: above float32's smallest normal number, and below its
# largest over log2(e) (with a margin for float32's rounding), so that scale log2(e) stays finite in float32.
# (The upper bound was float32's largest, 3.4e38: 3e38 took the fast path, which the full path refuses.)
_FAST_SCALE = (1.2e-38, 3.4028234663852886e38 / _LOG2E * 0.999)
assert _f32_ok(_FAST_SCALE[0]) and _f32_ok(_FAST_SCALE[1])


def plain_args(causal, scale):
    """The fast paths' check of causal and scale: as causal_arg / scale_arg would pass them, for a Python (or
    numpy float64) scale in float32's normal range that _f32_ok takes (_FAST_SCALE); anything else (False) takes
    the full path, which converts it or says what is wrong."""
    return (causal is True or causal is False) and (scale is None or (isinstance(scale, float)
                                                                      and _FAST_SCALE[0] < scale < _FAST_SCALE[1]))


def _no_autograd(q, k, v, op):
    """The op is forward only: with autograd recording and an input that requires grad, its output would
    silently carry no gradient to the layers before it (no backward exists), so the call is refused."""
    inputs_grad_refused(op, q, k, v, what="forward only (no backward), but q, k or v requires grad", instead="")


def _described(t):
    """What was passed, for an error: a tensor's dtype, shape, layout and device, else its type."""
    if not isinstance(t, torch.Tensor):
        return f"a {type(t).__name__}"
    layout = "contiguous" if t.is_contiguous() else f"strides {t.stride()}"
    return f"a {str(t.dtype).replace('torch.', '')} tensor {tuple(t.shape)}, {layout}, on {t.device}"


def _check_out(out, q, op):
    if (not isinstance(out, torch.Tensor) or out.shape != q.shape or out.dtype != _BF16 or not out.is_contiguous()
            or out.device != q.device):
        raise MkernelError(f"{op}: out must be a contiguous bf16 tensor shaped like q {tuple(q.shape)} on {q.device} "
                           f"(got {_described(out)})")


def _check_lse(lse, shape, device, op):
    if (not isinstance(lse, torch.Tensor) or tuple(lse.shape) != tuple(shape) or lse.dtype != torch.float32
            or not lse.is_contiguous() or lse.device != device):
        raise MkernelError(f"{op}: lse must be a contiguous float32 tensor of shape {tuple(shape)} on {device} "
                           f"(got {_described(lse)})")


def _run(q, k, v, out, lse, causal, scale):
    fn = _need("mk_attention_fwd", "attention")
    b, sq, h, d = q.shape
    dev = q.get_device()
    with torch.cuda.device(dev):
        rc = _launch(fn, q, k, v, out, lse, b, sq, k.shape[1], h, k.shape[2], d, causal, scale, dev)
    check(rc)


def _launch(fn, q, k, v, out, lse, b, sq, skv, h, hkv, d, causal, scale, dev):
    """The library call through fn (mk_attention_fwd; its return code). Inside a CUDA-graph capture, the causal
    unit counter in a workspace from the graph's pool (ops.capture_workspace), so the graph's calls claim their
    units as eager calls do."""
    args = (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(), b, sq, skv, h, hkv, d,
            int(causal), scale, 0)  # (causal a bool, scale the library's float: causal_arg, scale_arg)
    if _capturing():
        ptr, nbytes, _keep = capture_workspace("mk_attention_workspace_bytes", "attention",
                                               (b, sq, skv, h, hkv, d, int(causal), 0), q.device)
        if ptr is not None:
            return lib.mk_attention_fwd_ws(*args, ptr, nbytes, _stream(dev))
    return fn(*args, _stream(dev))


@torch.library.custom_op("mkernel::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                  scale: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    # torch.compile's generated code may pass any layout and start: dense16 is free when it already is dense and
    # 16-byte aligned.
    q, k, v = dense16(q), dense16(k), dense16(v)
    _validate(q, k, v)
    out = torch.empty_like(q)
    lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    _run(q, k, v, out, lse, causal, scale)
    return out, lse


@_attention_op.register_fake
def _(q, k, v, causal=False, scale=0.0):
    _validate(q, k, v, meta=True)  # a traced call with bad shapes fails at trace time
    return q.new_empty(q.shape), q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)


# Steady-state calls: shapes that passed _validate before (_SEEN) need only
# the per-tensor checks, combined; anything unusual takes the full path
# (which raises with the detailed message). Issue [python]: under 10 us a
# call (bench/python_overhead.py).
_SEEN = set()
_SEEN_MAX = 4096
_LAST = [None]  # the last key found in _SEEN: compared without hashing (hashing three shapes: ~0.9 us)


def _fast_io(q, k, v, out, lse, dev, qs=None):
    """The fast paths' check of q, k, v and a given out / lse (attention and ring attention): layout, shapes and
    out / lse apart from the inputs and each other; qs: q.shape if the caller has it (each shape read is a call
    into torch)."""
    if not (_fast_ok(q, _BF16, dev) and _fast_ok(k, _BF16, dev) and _fast_ok(v, _BF16, dev)):
        return False
    if out is None and lse is None:
        return True
    qs = q.shape if qs is None else qs
    if out is not None and (not _fast_ok(out, _BF16, dev) or out.shape != qs or not _fast_apart(out, q, k, v)):
        return False
    return lse is None or (_fast_ok(lse, torch.float32, dev) and lse.shape == (qs[0], qs[2], qs[1])
                           and _fast_apart(lse, q, k, v, out))


def into(res, out, lse):
    """A traced call's (out, lse) from the custom op's results `res`: copied into a given out / lse (the op has
    no out= variant; a tracer records the copy), else the op's own."""
    o, l = res
    if out is not None:
        out.copy_(o)
    if lse is not None:
        lse.copy_(l)
    return (o if out is None else out), (l if lse is None else lse)


def _hot(q, k, v, causal, scale, out, lse):
    if modes_on() or not plain_args(causal, scale):  # (first: torch.compile traces none of what follows)
        return None
    try:
        qs, ks = q.shape, k.shape
        key = (qs, ks, v.shape)
        if key != _LAST[0]:
            if key not in _SEEN:
                return None
            _LAST[0] = key
    except (AttributeError, TypeError):  # not tensors; unhashable (symbolic) shapes
        return None
    dev = _get_device()
    if not _fast_io(q, k, v, out, lse, dev, qs):
        return None
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad
                                    or (out is not None and out.requires_grad)
                                    or (lse is not None and lse.requires_grad)):
        return None  # (the full path refuses it: _no_autograd, out_grad_refused)
    b, sq, h, d = qs
    out_given, lse_given = out, lse
    if out is None:
        out = torch.empty_like(q)
    if lse is None:
        lse = torch.empty((b, h, sq), dtype=torch.float32, device=q.device)
    rc = _launch(_mk_attention, q, k, v, out, lse, b, sq, ks[1], h, ks[2], d, causal,
                 0.0 if scale is None else float(scale), dev)
    if rc:
        check(rc)
    if out_given is not None or lse_given is not None:
        bump_version(out_given, lse_given)
    return out, lse


def attention(q, k, v, causal=False, scale=None, out=None, lse=None):
    """Softmax attention forward; returns (out, lse). See the module docstring."""
    if _mk_attention is not None:
        hot = _hot(q, k, v, causal, scale, out, lse)
        if hot is not None:
            return hot
    _validate(q, k, v)
    causal, scale = causal_arg(causal, "mkernel.attention"), scale_arg(scale, "mkernel.attention")
    _no_autograd(q, k, v, "mkernel.attention")
    out_grad_refused("mkernel.attention", out, lse)
    lse_shape = (q.shape[0], q.shape[2], q.shape[1])
    if out is not None:
        _check_out(out, q, "mkernel.attention")
    if lse is not None:
        _check_lse(lse, lse_shape, q.device, "mkernel.attention")
    if traced("mkernel.attention", q, k, v, out, lse):  # (before _SEEN: symbolic shapes do not hash)
        return into(torch.ops.mkernel.attention(q, k, v, causal, scale), out, lse)
    if len(_SEEN) >= _SEEN_MAX:  # many distinct shapes (e.g. varying lengths): start over
        _SEEN.clear()
        _LAST[0] = None
    _SEEN.add((q.shape, k.shape, v.shape))
    out_given, lse_given = out, lse
    if out is None:
        out = torch.empty_like(q)
    if lse is None:
        lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device)
    _run(q, k, v, out, lse, causal, scale)
    if out_given is not None or lse_given is not None:
        bump_version(out_given, lse_given)
    return out, lse
