"""mkernel ops on torch tensors, on the current CUDA stream.

    out = mkernel.gemm(a, b)            # bf16: a [m, k] @ b[n, k]^T -> [m, n]
    mkernel.gemm(a, b, out=out)         # into an existing (row-major) tensor

Each op is registered as a torch custom op (torch.library, namespace
"mkernel") with a fake implementation, so torch.compile traces it, and an
autograd formula; eager calls that autograd need not record skip the
dispatcher (it costs microseconds per call) and go straight to the C ABI,
unless torch is tracing or transforming (traced(): torch.compile, a dispatcher
mode such as FakeTensorMode or make_fx, a torch.func transform, a tensor
subclass); forward-mode AD is refused. Ops launch on
torch.cuda.current_stream(), never synchronise the host, and are CUDA-graph
capturable. Through torch's allocator an eager call allocates only its output
(per-call scratch, where a call needs it, comes from the library's own pool);
inside a CUDA-graph capture a call that needs scratch (the GEMM's split
tiles, causal attention's unit counter) takes it from the graph's memory pool
too (capture_workspace). The tensor-parallel ops' first call with a shape also
makes its plan (mkernel/tp.py), which holds device memory until it is closed.
"""
import torch
from . import _torch_req  # noqa: F401  (torch >= 2.4: a clear ImportError before the custom ops' decorators)

from ._lib import MkernelError, c_int_arg, check, lib
from ._ops_c import _need, workspace_bytes
from ._ops_c import gemm_ptr, gemm_workspace_bytes  # noqa: F401  (re-exported)


def _check_matrix(t, name, device=None, op="mkernel.gemm"):
    if not isinstance(t, torch.Tensor):
        raise MkernelError(f"{op}: {name} must be a torch.Tensor (got {type(t).__name__})")
    if t.dtype != torch.bfloat16:
        raise MkernelError(f"{op}: {name} must be bfloat16 (got {t.dtype})")
    if not t.is_cuda:
        raise MkernelError(f"{op}: {name} must be on a CUDA device (got {t.device})")
    if device is not None and t.device != device:
        raise MkernelError(f"{op}: {name} is on {t.device}, the first operand on {device}")
    if t.dim() != 2:
        raise MkernelError(f"{op}: {name} must be 2-D (got shape {tuple(t.shape)})")
    if t.stride(1) != 1:
        raise MkernelError(f"{op}: {name} must be row-major with unit column stride "
                           f"(got strides {t.stride()}); call .contiguous()")


def _validate_gemm(a, b, out):
    """Raises MkernelError naming what is wrong (the slow path of _gemm_into)."""
    _check_matrix(a, "a")
    _check_matrix(b, "b", a.device)
    if out is not None:
        _check_matrix(out, "out", a.device)
    m, k = a.shape
    n = b.shape[0]
    if b.shape[1] != k:
        raise MkernelError(f"mkernel.gemm: a is [{m}, {k}] but b is {list(b.shape)}; b must be [n, {k}] "
                           "(torch.nn.Linear weight layout)")
    if out is not None and tuple(out.shape) != (m, n):
        raise MkernelError(f"mkernel.gemm: out must be [{m}, {n}] (got {list(out.shape)})")
    if n < 64 or n % 64 or k < 64 or k % 64:
        raise MkernelError(f"mkernel.gemm: n and k must be positive multiples of 64 (got n={n}, k={k}: a "
                           f"{list(a.shape)}, b {list(b.shape)})")
    if (m > 1 and a.stride(0) != k) or b.stride(0) != k:  # (one row: its row stride is never used)
        raise MkernelError("mkernel.gemm: a and b must be contiguous (row stride == k); call .contiguous()")
    if out is not None and m > 1 and out.stride(0) < n:
        raise MkernelError(f"mkernel.gemm: out's rows must not overlap (row stride >= {n}; got strides "
                           f"{out.stride()}, e.g. an expanded tensor)")
    if out is not None and m > 1 and out.stride(0) % 2:  # (the library's rule on ldo, named in out's terms)
        raise MkernelError(f"mkernel.gemm: out's row stride must be even (got strides {out.stride()}, e.g. a "
                           "column slice of a tensor with an odd number of columns)")


_BF16 = torch.bfloat16
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
# An eager call that writes into a caller's out= tensor through its pointer tells autograd, as torch's own
# in-place ops do: a tensor saved for a backward and then overwritten makes that backward raise ("modified by
# an inplace operation") instead of computing with the new values. (The *_out custom ops are told by torch.)
_increment_version = getattr(getattr(torch.autograd, "graph", None), "increment_version", None)


def bump_version(*tensors):
    """Tells autograd the tensors (None: skipped) changed; returns the first (a call's output)."""
    if _increment_version is not None:
        for t in tensors:
            if t is not None:
                _increment_version(t)
    return tensors[0] if tensors else None

_get_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_mk_gemm = getattr(lib, "mk_gemm_bf16", None)
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing


def capture_workspace(symbol, op, dims, device):
    """Inside a CUDA-graph capture the library's own pool cannot give a call its per-call scratch (the GEMM's
    split tiles, the causal attention's unit counter: it would belong to the graph), so the call would run
    without it (unsplit tiles, static units). A tensor from torch's allocator can (in a capture: the graph's
    pool): returns (pointer, bytes, tensor) with the tensor to hold until the call is queued, or (None, 0,
    None) when the call needs none or the library predates workspaces (then the caller takes the call without
    one)."""
    if not hasattr(lib, symbol):
        return None, 0, None
    n = workspace_bytes(symbol, op, *dims)
    if not n:
        return None, 0, None
    t = torch.empty(n, dtype=torch.uint8, device=device)
    return t.data_ptr(), n, t


# Where a call must take the dispatcher (torch.ops.mkernel.*) rather than go straight to the library: there
# the library would be handed tensors without memory or values of their own (FakeTensor, meta, a transform's
# wrappers), or the mode that records ops (make_fx, FlopCounterMode) would not see the call. The custom ops
# then do the right thing: the fake implementation, the mode's recording, or torch's own error (vmap and
# forward AD have no rule for them) instead of a silently wrong result.
_is_compiling = torch.compiler.is_compiling
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None) or (lambda: 0)
_transforms = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", None) or (lambda: None)
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_T, _P = _PLAIN
import torch.autograd.forward_ad as _fwad  # noqa: E402  (_current_level: -1 outside fwAD.dual_level)


def modes_on():
    """torch.compile tracing, a TorchDispatchMode (FakeTensorMode, make_fx, FlopCounterMode, ...), a
    torch.func transform (vmap, grad, jvp) or an open forward-AD level (fwAD.dual_level). ~0.25 us."""
    # (torch.compile first: it traces none of what follows)
    return _is_compiling() or _dispatch_modes() > 0 or _transforms() is not None or _fwad._current_level >= 0


_MODE_KEYS = getattr(torch._C, "_TorchDispatchModeKey", None)
_get_mode = getattr(torch._C, "_get_dispatch_mode", None)


def recording_mode():
    """The name of a mode in effect that records ops into a graph instead of (or beside) running them: make_fx's
    proxy mode ("make_fx"), or a FakeTensorMode ("fake tensors": torch.export, make_fx(tracing_mode="fake")); else
    None. A plan made by hand launches at once through the library, which no such graph records."""
    if _MODE_KEYS is None or _get_mode is None or _dispatch_modes() == 0:  # (the stack counts infra modes too)
        return None
    if _get_mode(_MODE_KEYS.PROXY) is not None:
        return "make_fx"
    if _get_mode(_MODE_KEYS.FAKE) is not None:
        return "fake tensors"
    return None


def traced(op, *tensors):
    """modes_on(), or a tensor subclass among `tensors` (FakeTensor, DTensor, ...: nn.Parameter counts as a
    plain tensor; None and anything not a tensor are skipped, the checks say what is wrong with those).
    Raises for an input with a forward-AD tangent (fwAD.make_dual, torch.func.jvp): the custom ops have no
    forward-mode formula, and torch would drop the tangent silently (the output would carry none)."""
    if modes_on():
        tangents_refused(op, tensors)
        return True
    for t in tensors:  # (a loop: any() over a generator costs twice as much)
        if t is not None and type(t) is not _T and type(t) is not _P and isinstance(t, torch.Tensor):
            return True
    return False


def _fast_ok(t, dtype, dev):
    """The steady-state fast paths' per-tensor check (tp, attention, ring attention): a contiguous plain
    (not a subclass: traced()) `dtype` tensor on CUDA device `dev` (>= 0; get_device() is -1 for a CPU
    tensor), 16-byte aligned. False sends the call to the full checks. A few attribute reads (each ~0.1 us:
    bench/python_overhead.py --breakdown); the caller checks modes_on() first."""
    try:
        return ((type(t) is _T or type(t) is _P) and t.dtype is dtype and t.get_device() == dev
                and t.is_contiguous() and t.data_ptr() % 16 == 0)
    except (AttributeError, TypeError, RuntimeError):  # not a tensor; no storage
        return False


def _fast_apart(out, *inputs, same_ok=False):
    """The fast paths' check that a given `out` shares no byte with any of `inputs` (None: skipped), all
    _fast_ok already; same_ok: the very same memory as an input is allowed (an in-place all_reduce). False sends
    the call to the full checks, which name the overlap: the library would refuse it at launch on this rank
    alone, with the other ranks of a collective op already launched."""
    lo = out.data_ptr()
    hi = lo + out.nbytes
    for t in inputs:
        if t is not None:
            t_lo = t.data_ptr()
            t_hi = t_lo + t.nbytes
            if lo < t_hi and t_lo < hi and not (same_ok and lo == t_lo and hi == t_hi):
                return False
    return True


def has_address(t):
    """Whether data_ptr() means something for `t`: not meta, not a subclass (FakeTensor, ...), not a torch.func
    transform's wrapper."""
    return t.device.type != "meta" and (type(t) is _T or type(t) is _P) and _transforms() is None


def aligned16(t):
    """Whether `t` starts at a 16-byte aligned address. A tensor without one (has_address) is judged by its
    byte offset into its storage instead (storages start aligned); one without a storage either (some
    wrappers) passes (the library checks the call it gets)."""
    try:
        if has_address(t):
            return t.data_ptr() % 16 == 0
        return t.storage_offset() * t.element_size() % 16 == 0
    except RuntimeError:  # "doesn't have storage"
        return True


def dense16(t):
    """`t` row-major and starting 16-byte aligned, as the library takes it: `t` itself when it is, else a copy.
    For the custom ops' bodies, which torch.compile's code and autograd's backward call with what they have (a
    gradient may be contiguous but start at an odd offset into its storage: a slice of a cat's gradient); the
    public functions refuse such inputs instead of copying what the caller did not ask for."""
    if t.is_contiguous() and aligned16(t):
        return t
    return t.clone(memory_format=torch.contiguous_format)


def tangents_refused(op, tensors):
    """Raises for a forward-AD tangent on any of `tensors` (an open fwAD.dual_level; not while torch.compile
    traces): no op here has a forward-mode formula, and its output would silently carry no tangent."""
    if _fwad._current_level >= 0 and not _is_compiling():  # (the level first: one attribute read per call)
        for t in tensors:
            if isinstance(t, torch.Tensor) and _fwad.unpack_dual(t).tangent is not None:
                raise MkernelError(f"{op}: forward-mode AD (torch.autograd.forward_ad, torch.func.jvp) is not "
                                   "supported: an input's tangent would be dropped; use reverse mode "
                                   "(.backward() or torch.autograd.grad)")


def inputs_grad_refused(op, *inputs, what="no backward here, but an input requires grad",
                        instead=", or through the op function (mkernel.gemm_rs, ...), which has a backward"):
    """Raises where autograd is recording and an input (None: skipped) requires grad, for a call with no backward
    (the explicit plans' methods, forward-only ops): its output would silently carry no gradient back. So does an
    input with a forward-AD tangent (a dual tensor does not require grad, and these calls trace nothing that would
    refuse it: before 2026-12-06 the plans' methods dropped it)."""
    tangents_refused(op, inputs)
    if torch.is_grad_enabled() and any(t is not None and getattr(t, "requires_grad", False) for t in inputs):
        raise MkernelError(f"{op}: {what} and autograd is recording: call it under torch.no_grad() / "
                           f"torch.inference_mode(), or on detached inputs{instead}")


_INT31 = 1 << 31


def ctas_arg(n, name="num_compute_ctas", op="mkernel.gemm"):
    """An SM count as the library takes it: a C int >= 0 (0: all; the library checks the upper bound, the
    device's SMs)."""
    return c_int_arg(n, name, op, 0)


def out_grad_refused(op, *outs):
    """Raises where autograd is recording and a given out (None: skipped) requires grad: writing it through
    the library would bypass autograd (a leaf overwritten silently, a non-leaf keeping a stale grad_fn), which
    torch's own out= ops refuse too."""
    for t in outs:  # (a loop, grad mode read last: ~0.2 us on gemm's hot path, any() over a generator 0.45)
        if t is not None and getattr(t, "requires_grad", False) and torch.is_grad_enabled():
            break
    else:
        return
    raise MkernelError(f"{op}: out= does not support autograd, and the given output requires grad; pass one "
                       "that does not (or detach it), or call under torch.no_grad()")


def _stream(dev):
    return _raw_stream(dev) if _raw_stream else torch.cuda.current_stream(dev).cuda_stream


def _gemm_into(a, b, out, num_compute_ctas):
    # NOTES: this is the per-call hot path (target: < 10 us per call from
    # Python, bench/python_overhead.py): one combined check with few calls,
    # the detailed one only on failure.
    if _mk_gemm is None:
        _need("mk_gemm_bf16", "gemm")
    try:
        ok = (a.dtype is _BF16 and b.dtype is _BF16 and out.dtype is _BF16 and a.is_cuda and a.dim() == 2
              and b.dim() == 2 and out.dim() == 2)
    except AttributeError:  # not tensors
        ok = False
    if not ok:
        _validate_gemm(a, b, out)
    if type(num_compute_ctas) is not int or not 0 <= num_compute_ctas < _INT31:  # (ctypes would wrap or refuse)
        num_compute_ctas = ctas_arg(num_compute_ctas)
    m, k = a.shape
    n = b.shape[0]
    dev = a.get_device()
    ldo, one = out.stride()
    if (b.shape[1] != k or out.shape != (m, n) or a.stride() != (k, 1) or b.stride() != (k, 1) or one != 1
            or ldo < n or ldo & 1 or b.get_device() != dev or out.get_device() != dev):
        _validate_gemm(a, b, out)  # raises, or passes a one-row a or out whose row stride is unused
        ldo = max(ldo, n)
    if m < 2:  # one row: its stride is never used (the library wants an even one); no row: no work
        if not m:
            _validate_gemm(a, b, out)  # (the rules still hold: e.g. k a multiple of 64)
            return
        ldo = n
    if dev == _get_device():
        ws = _GEMM_WS.get((m, n, k, num_compute_ctas, dev))  # (inline: the steady state's call costs a lookup)
        if ws is False:  # needs no workspace: never the capture query
            rc = _mk_gemm(a.data_ptr(), b.data_ptr(), out.data_ptr(), m, n, k, ldo, num_compute_ctas, _stream(dev))
        else:
            rc = _launch_gemm(a, b, out, m, n, k, ldo, num_compute_ctas, dev)
    else:
        with torch.cuda.device(dev):
            rc = _launch_gemm(a, b, out, m, n, k, ldo, num_compute_ctas, dev)
    if rc:
        check(rc)


_GEMM_WS = {}  # (m, n, k, num_compute_ctas, device) -> whether such a call takes per-call scratch


def _gemm_needs_workspace(m, n, k, ctas, dev):
    """Whether a GEMM of these dimensions on device `dev` splits its last wave (mk_gemm_workspace_bytes > 0: a
    function of the dimensions and the device's SM count), cached: most calls need none, and then the capture
    query (~0.3 us) is not made."""
    key = (m, n, k, ctas, dev)
    need = _GEMM_WS.get(key)
    if need is None:
        if len(_GEMM_WS) >= 4096:
            _GEMM_WS.clear()
        need = _GEMM_WS[key] = bool(hasattr(lib, "mk_gemm_workspace_bytes")
                                    and workspace_bytes("mk_gemm_workspace_bytes", "gemm", m, n, k, ctas))
    return need


def _launch_gemm(a, b, out, m, n, k, ldo, num_compute_ctas, dev):
    """The library call (its return code). Inside a CUDA-graph capture, split tiles in a workspace from the
    graph's pool (capture_workspace), so the graph computes what an eager call does, bit for bit."""
    args = (a.data_ptr(), b.data_ptr(), out.data_ptr(), m, n, k, ldo, num_compute_ctas)
    if _gemm_needs_workspace(m, n, k, num_compute_ctas, dev) and _capturing():
        ptr, nbytes, _keep = capture_workspace("mk_gemm_workspace_bytes", "gemm", (m, n, k, num_compute_ctas),
                                               a.device)
        if ptr is not None:
            return lib.mk_gemm_bf16_ws(*args, ptr, nbytes, _stream(dev))
    return _mk_gemm(*args, _stream(dev))


@torch.library.custom_op("mkernel::gemm", mutates_args=())
def _gemm_op(a: torch.Tensor, b: torch.Tensor, num_compute_ctas: int = 0) -> torch.Tensor:
    # (dense16: torch.compile's code may hand the body other strides than the call had, as to the TP ops' bodies;
    # gemm() checked the caller's tensors before the dispatcher)
    a, b = dense16(a), dense16(b)
    out = a.new_empty((a.shape[0], b.shape[0]))
    _gemm_into(a, b, out, num_compute_ctas)
    return out


@_gemm_op.register_fake
def _(a, b, num_compute_ctas=0):
    return a.new_empty((a.shape[0], b.shape[0]))


def _gemm_setup_context(ctx, inputs, output):
    a, b, _ = inputs
    ctx.save_for_backward(a, b)


def _gemm_backward(ctx, grad):
    # d(a b^T)/da = grad b, d/db = grad^T a (torch's GEMMs: these shapes are
    # not in the nn.Linear layout the forward engine takes).
    a, b = ctx.saved_tensors
    grad_a = grad @ b if ctx.needs_input_grad[0] else None
    grad_b = grad.t() @ a if ctx.needs_input_grad[1] else None
    return grad_a, grad_b, None


_gemm_op.register_autograd(_gemm_backward, setup_context=_gemm_setup_context)


@torch.library.custom_op("mkernel::gemm_out", mutates_args=("out",))
def _gemm_out_op(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, num_compute_ctas: int = 0) -> None:
    _gemm_into(dense16(a), dense16(b), out, num_compute_ctas)  # (out is written in place: as given, checked)


@_gemm_out_op.register_fake
def _(a, b, out, num_compute_ctas=0):
    return None


def gemm(a, b, out=None, num_compute_ctas=0):
    """bf16 a [m, k] @ b [n, k]^T -> [m, n] (b in nn.Linear weight layout; n, k multiples of 64).

    num_compute_ctas: SMs the GEMM may use (0: all). Errors raise MkernelError.
    """
    # Through the dispatcher when tracing (torch.compile, dispatcher modes, tensor subclasses: traced()) or
    # when autograd must record the op; otherwise straight to the library.
    try:
        grad = (a.requires_grad or b.requires_grad) and torch.is_grad_enabled()
    except AttributeError:  # not tensors
        _validate_gemm(a, b, out)
        raise
    if out is None:
        if traced("mkernel.gemm", a, b):
            _validate_gemm(a, b, None)  # (the fake implementation checks nothing: said at trace time)
            return torch.ops.mkernel.gemm(a, b, ctas_arg(num_compute_ctas))
        if grad:
            _validate_gemm(a, b, None)  # (the custom op would index shapes before any check)
            return torch.ops.mkernel.gemm(a, b, ctas_arg(num_compute_ctas))
        if not (a.dtype is _BF16 and a.is_cuda and a.dim() == 2 and b.dim() == 2):
            _validate_gemm(a, b, None)
        out = a.new_empty((a.shape[0], b.shape[0]))
        _gemm_into(a, b, out, num_compute_ctas)
        return out
    if grad:  # (first: gemm_out has no autograd formula, traced or not)
        raise MkernelError("mkernel.gemm: out= does not support autograd (inputs require grad); drop out=")
    if getattr(out, "requires_grad", False) and torch.is_grad_enabled():  # (inline: the hot path's common case)
        out_grad_refused("mkernel.gemm", out)
    plain = type(a) is _T and type(b) is _T and type(out) is _T  # (traced()'s common case, inline: ~0.15 us less)
    if (not plain or modes_on()) and traced("mkernel.gemm", a, b, out):
        _validate_gemm(a, b, out)
        torch.ops.mkernel.gemm_out(a, b, out, ctas_arg(num_compute_ctas))
        return out
    _gemm_into(a, b, out, num_compute_ctas)
    bump_version(out)
    return out
