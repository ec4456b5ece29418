"""C ABI of the ops (include/mkernel/mkernel.h), without torch: pointer-level
entry points, and the check that the library was built with an op."""
import ctypes

from ._lib import MkernelError, c_int_arg, check, lib

_c = ctypes.c_void_p
_i64 = ctypes.c_int64
_int = ctypes.c_int
_size = ctypes.c_size_t
_OPS = {  # C symbol -> (argtypes); absent when the library was built without the op (MK_OPS)
    "mk_gemm_bf16": [_c, _c, _c, _i64, _i64, _i64, _i64, _int, _c],
    "mk_gemm_bf16_ws": [_c, _c, _c, _i64, _i64, _i64, _i64, _int, _c, _size, _c],
    "mk_gemm_workspace_bytes": [_i64, _i64, _i64, _int, ctypes.POINTER(_size)],
    "mk_ag_gemm_create": [_c, _i64, _i64, _i64, _int, _int, ctypes.POINTER(_c)],
    "mk_ag_gemm_run": [_c, _c, _c, _c, _c, _c],
    "mk_ag_gemm_all_gather": [_c, _c, _c, _c],
    "mk_ag_gemm_destroy": [_c],
    "mk_ag_gemm_captured": [_c, ctypes.POINTER(_int)],
    "mk_gemm_rs_create": [_c, _i64, _i64, _i64, _int, _int, ctypes.POINTER(_c)],
    "mk_gemm_rs_run": [_c, _c, _c, _c, _c],
    "mk_gemm_rs_reduce_scatter": [_c, _c, _c, _c],
    "mk_gemm_rs_destroy": [_c],
    "mk_gemm_rs_captured": [_c, ctypes.POINTER(_int)],
    "mk_gemm_ar_create": [_c, _i64, _i64, _i64, _int, _int, ctypes.POINTER(_c)],
    "mk_gemm_ar_create_ex": [_c, _i64, _i64, _i64, _int, _int, _int, ctypes.POINTER(_c)],
    "mk_gemm_ar_run": [_c, _c, _c, _c, _c],
    "mk_gemm_ar_all_reduce": [_c, _c, _c, _c],
    "mk_gemm_ar_destroy": [_c],
    "mk_gemm_ar_captured": [_c, ctypes.POINTER(_int)],
    "mk_ring_attn_create": [_c, _i64, _i64, _i64, _i64, _i64, _int, ctypes.c_float, _int, _int, ctypes.POINTER(_c)],
    "mk_ring_attn_run": [_c, _c, _c, _c, _c, _c, _c],
    "mk_ring_attn_destroy": [_c],
    "mk_ring_attn_captured": [_c, ctypes.POINTER(_int)],
    "mk_ring_attn_trace": [_c, _int],
    "mk_ring_attn_read_trace": [_c, _c, _i64, ctypes.POINTER(_i64)],
    "mk_attention_fwd": [_c, _c, _c, _c, _c, _i64, _i64, _i64, _i64, _i64, _i64, _int, ctypes.c_float, _int, _c],
    "mk_attention_fwd_ws": [_c, _c, _c, _c, _c, _i64, _i64, _i64, _i64, _i64, _i64, _int, ctypes.c_float, _int, _c,
                            _size, _c],
    "mk_attention_workspace_bytes": [_i64, _i64, _i64, _i64, _i64, _i64, _int, _int, ctypes.POINTER(_size)],
}
for _name, _args in _OPS.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        continue
    _fn.argtypes = _args
    _fn.restype = ctypes.c_int


def _need(symbol, op):
    if not hasattr(lib, symbol):
        raise MkernelError(f"mkernel: this libmkernel.so was built without the '{op}' op "
                           f"(rebuild with MK_OPS=all or include {op})")
    return getattr(lib, symbol)


_U64 = (0, (1 << 64) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)


def gemm_ptr(a, b, out, m, n, k, ldo=0, num_compute_ctas=0, stream=0, workspace=0, workspace_bytes=0):
    """Pointer-level GEMM (no torch): device addresses as ints, stream a cudaStream_t as int; workspace
    (optional, gemm_workspace_bytes(m, n, k, num_compute_ctas) bytes) as in include/mkernel/gemm.hpp. Every
    argument must be an int in its C type's range (ctypes would take a str or bytes as a host address, wrap
    2**64 + 64 to 64, and refuse a float with a bare ArgumentError)."""
    # The common case (plain ints, addresses below 2**64, dims >= 0) in one expression: eleven c_int_arg calls
    # cost ~4 us a call (session 43, bench/python_overhead.py), this ~0.4 us; anything else gets the
    # detailed checks, which name the argument.
    if not (type(a) is type(b) is type(out) is type(stream) is type(workspace) is type(workspace_bytes) is type(m)
            is type(n) is type(k) is type(ldo) is type(num_compute_ctas) is int
            and not (a | b | out | stream | workspace | workspace_bytes) >> 64 and not (m | n | k | ldo) >> 63
            and not num_compute_ctas >> 31):
        op = "mkernel.gemm_ptr"
        a, b, out, stream, workspace, workspace_bytes = (
            c_int_arg(v, name, op, *_U64) for v, name in ((a, "a"), (b, "b"), (out, "out"), (stream, "stream"),
                                                         (workspace, "workspace"), (workspace_bytes, "workspace_bytes")))
        m, n, k, ldo = (c_int_arg(v, name, op, *_I64) for v, name in ((m, "m"), (n, "n"), (k, "k"), (ldo, "ldo")))
        num_compute_ctas = c_int_arg(num_compute_ctas, "num_compute_ctas", op, 0)
    if not workspace:  # (also a library from before workspaces)
        check(_need("mk_gemm_bf16", "gemm")(a, b, out, m, n, k, ldo, num_compute_ctas, stream))
        return
    check(_need("mk_gemm_bf16_ws", "gemm")(a, b, out, m, n, k, ldo, num_compute_ctas, workspace, workspace_bytes,
                                           stream))


def workspace_bytes(symbol, op, *dims):
    """What mk_gemm_workspace_bytes / mk_attention_workspace_bytes say for these dimensions."""
    n = _size()
    check(_need(symbol, op)(*dims, ctypes.byref(n)))
    return n.value


def gemm_workspace_bytes(m, n, k, num_compute_ctas=0):
    """Bytes of workspace a GEMM of these dimensions uses (0: none; include/mkernel/gemm.hpp). The arguments
    are checked as gemm_ptr's (ctypes would wrap 2**64 + 128 to 128 and refuse a float with a bare ArgumentError)."""
    op = "mkernel.gemm_workspace_bytes"
    m, n, k = (c_int_arg(v, name, op, *_I64) for v, name in ((m, "m"), (n, "n"), (k, "k")))
    return workspace_bytes("mk_gemm_workspace_bytes", "gemm", m, n, k,
                           c_int_arg(num_compute_ctas, "num_compute_ctas", op, 0))
