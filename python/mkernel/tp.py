"""Tensor-parallel fused ops on torch tensors (any N nodes x L GPUs, at most 8 ranks for gemm_rs; see include/mkernel/tp.hpp).

    comm = mkernel.init()                          # inside torchrun
    out = mkernel.ag_gemm(x_shard, w_col, comm)    # allgather(x_shard) @ w_col^T
    y = mkernel.gemm_rs(h, w_row, comm)            # this rank's rows of sum_ranks h @ w_row^T

Each call uses a plan cached per (communicator, op, shape): the first call
with a new shape creates it, collectively, so every rank must make the same
calls in the same order (as with any collective). Steady-state calls
allocate only their output, never synchronise the host, run on the current
stream and can be captured in CUDA graphs. The explicit plans
(mkernel.AgGemm, mkernel.GemmRs) are there for callers that manage their
own. bf16 only; autograd is not wired yet (inputs that require grad are
refused).
"""
import ctypes

import torch

from ._lib import MkernelError, check, lib
from ._ops_c import _need
from .ops import _check_matrix, _get_device, _stream


def _ptr(t):
    return t.data_ptr() if t is not None else None


class _Plan:
    _destroy = None  # C symbol

    def close(self):
        """Collective: every rank closes its plan (frees its symmetric memory)."""
        if getattr(self, "_h", None):
            check(getattr(lib, self._destroy)(self._h))
            self._h = None


class AgGemm(_Plan):
    """out [world * m_local, n] = allgather(a_local) @ b^T; one persistent kernel."""
    _destroy = "mk_ag_gemm_destroy"

    def __init__(self, comm, m_local, n, k, num_comm_ctas=0, num_ctas=0):
        h = ctypes.c_void_p()
        check(_need("mk_ag_gemm_create", "ag_gemm")(comm._h, int(m_local), int(n), int(k), int(num_comm_ctas),
                                                     int(num_ctas), ctypes.byref(h)))
        self._h, self.world, self.shape = h, comm.world, (int(m_local), int(n), int(k))

    def run(self, a_local, b, out=None, gathered=None):
        m_local, n, k = self.shape
        _check_shape(a_local, "a_local", (m_local, k))
        _check_shape(b, "b", (n, k), a_local.device)
        if out is None:
            out = a_local.new_empty((self.world * m_local, n))
        _check_shape(out, "out", (self.world * m_local, n), a_local.device)
        if gathered is not None:
            _check_shape(gathered, "gathered", (self.world * m_local, k), a_local.device)
        check(lib.mk_ag_gemm_run(self._h, a_local.data_ptr(), b.data_ptr(), out.data_ptr(), _ptr(gathered),
                                 _stream(a_local.get_device())))
        return out

    def all_gather(self, a_local, out=None):
        m_local, _, k = self.shape
        _check_shape(a_local, "a_local", (m_local, k))
        if out is None:
            out = a_local.new_empty((self.world * m_local, k))
        _check_shape(out, "out", (self.world * m_local, k), a_local.device)
        check(lib.mk_ag_gemm_all_gather(self._h, a_local.data_ptr(), out.data_ptr(), _stream(a_local.get_device())))
        return out


class GemmRs(_Plan):
    """out [m / world, n] = this rank's rows of sum over ranks of a @ b^T."""
    _destroy = "mk_gemm_rs_destroy"

    def __init__(self, comm, m, n, k_local, num_reduce_ctas=0, num_ctas=0):
        h = ctypes.c_void_p()
        check(_need("mk_gemm_rs_create", "gemm_rs")(comm._h, int(m), int(n), int(k_local), int(num_reduce_ctas),
                                                     int(num_ctas), ctypes.byref(h)))
        self._h, self.world, self.shape = h, comm.world, (int(m), int(n), int(k_local))

    def run(self, a, b, out=None):
        m, n, k = self.shape
        _check_shape(a, "a", (m, k))
        _check_shape(b, "b", (n, k), a.device)
        if out is None:
            out = a.new_empty((m // self.world, n))
        _check_shape(out, "out", (m // self.world, n), a.device)
        check(lib.mk_gemm_rs_run(self._h, a.data_ptr(), b.data_ptr(), out.data_ptr(), _stream(a.get_device())))
        return out

    def reduce_scatter(self, x, out=None):
        m, n, _ = self.shape
        _check_shape(x, "x", (m, n))
        if out is None:
            out = x.new_empty((m // self.world, n))
        _check_shape(out, "out", (m // self.world, n), x.device)
        check(lib.mk_gemm_rs_reduce_scatter(self._h, x.data_ptr(), out.data_ptr(), _stream(x.get_device())))
        return out


def _check_shape(t, name, shape, device=None):
    _check_matrix(t, name, device, op="mkernel (tensor parallel)")
    if tuple(t.shape) != tuple(shape) or not t.is_contiguous():
        raise MkernelError(f"mkernel: {name} must be a contiguous {list(shape)} tensor (got {list(t.shape)}, "
                           f"strides {t.stride()})")
    if t.get_device() != _get_device():
        raise MkernelError(f"mkernel: {name} is on cuda:{t.get_device()}, the current device is "
                           f"cuda:{_get_device()} (the communicator's)")
    if t.requires_grad and torch.is_grad_enabled():
        raise MkernelError(f"mkernel: {name} requires grad; the tensor-parallel ops have no autograd formula yet")


_PLANS = {}


def _plan(cls, comm, *shape):
    key = (cls.__name__, comm._uid, shape)
    p = _PLANS.get(key)
    if p is None:
        # Creating a plan is collective and allocates: never inside a CUDA
        # graph capture (run the op once, with these shapes, before capturing).
        if torch.cuda.is_current_stream_capturing():
            raise MkernelError(f"mkernel: no {cls.__name__} plan for shape {shape} yet, and plans cannot be made "
                               "during CUDA-graph capture; call the op once with these shapes before capturing")
        p = _PLANS[key] = cls(comm, *shape)
    return p


def ag_gemm(a_local, b, comm, out=None):
    """allgather(a_local) @ b^T over the communicator's ranks (one node)."""
    # Inputs are checked before the plan lookup: a plan for a new shape is
    # made collectively, and one rank's bad tensor must not start that alone.
    _check_matrix(a_local, "a_local", op="mkernel.ag_gemm")
    _check_matrix(b, "b", a_local.device, op="mkernel.ag_gemm")
    return _plan(AgGemm, comm, a_local.shape[0], b.shape[0], a_local.shape[1]).run(a_local, b, out)


def gemm_rs(a, b, comm, out=None):
    """This rank's rows of sum over ranks of a @ b^T (one node)."""
    _check_matrix(a, "a", op="mkernel.gemm_rs")
    _check_matrix(b, "b", a.device, op="mkernel.gemm_rs")
    return _plan(GemmRs, comm, a.shape[0], b.shape[0], a.shape[1]).run(a, b, out)


def close_plans(comm=None):
    """Collective: frees the cached plans (of one communicator, or all)."""
    for key in [k for k in _PLANS if comm is None or k[1] == comm._uid]:
        _PLANS.pop(key).close()
