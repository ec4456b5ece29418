"""GEMM+AllReduce and the all-reduce alone on torch tensors (include/mkernel/tp.hpp: GemmAr), for a
row-parallel layer whose output every rank needs whole (the MLP down-projection):

    y = mkernel.gemm_ar(h, w_row, comm)    # sum over ranks of h @ w_row^T, [m, n] on every rank
    r = mkernel.all_reduce(x, comm)        # sum over ranks of x, on every rank

The same bits on every rank. Built exactly as mkernel/tp.py's ops (its docstring says how): torch
custom ops (namespace "mkernel": gemm_ar, all_reduce, and gemm_ar_out / all_reduce_out that write
into out=) with fake implementations and autograd formulas made of these ops and torch matmuls;
plans cached per (communicator, op, shape), made collectively on first use; eager calls that
autograd need not record go straight to the library. Importing this module (mkernel.gemm_ar,
mkernel.all_reduce, mkernel.GemmAr do) registers its custom ops; mkernel.tp does not import it.
"""
import ctypes

import torch
from . import _torch_req  # noqa: F401  (torch >= 2.4: a clear ImportError before the custom ops' decorators)

from ._lib import lib
from ._ops_c import _need
from ._tp_meta import Mismatch, all_reduce_shape, comm_handle, gemm_ar_shape, marked_call, world
from .ops import _stream, bump_version, dense16, inputs_grad_refused, out_grad_refused
from ._tp_plans import _Plan, check_apart, plan_ints, refuse_pair
from .tp import (_COLLECTIVE_N, _PLANS, _check_inputs, _check_meta, _check_out_meta, _check_shape, _dispatch,
                 _grad, _hot, _hot_add, _key, _output, _plan, _shape)

__all__ = ["gemm_ar", "all_reduce", "GemmAr"]


class GemmAr(_Plan):
    """out [m, n] = sum over ranks of a @ b^T (the same bits on every rank); one persistent kernel. one_shot: run()'s
    variant, -1 by the measured crossover, 0 two-shot, 1 one-shot (one node of 2 ranks); a plan used only for
    all_reduce() takes 0, which holds no one-shot staging."""
    _destroy = "mk_gemm_ar_destroy"
    _captured = "mk_gemm_ar_captured"

    def __init__(self, comm, m, n, k_local, num_gather_ctas=0, num_ctas=0, one_shot=-1):
        ch = comm_handle(comm, "mkernel.GemmAr")
        m, n, k_local, num_gather_ctas, num_ctas, one_shot = plan_ints(
            "mkernel.GemmAr", dict(m=m, n=n, k_local=k_local),
            dict(num_gather_ctas=num_gather_ctas, num_ctas=num_ctas, one_shot=one_shot))
        h = ctypes.c_void_p()
        marked_call(comm, "making the plan of mkernel.GemmAr", _need("mk_gemm_ar_create_ex", "gemm_ar"), ch, m, n,
                    k_local, num_gather_ctas, num_ctas, one_shot, ctypes.byref(h))
        self._bind(comm, h)
        self.world, self.shape = comm.world, (m, n, k_local)

    def run(self, a, b, out=None):
        m, n, k = self.shape
        self._open(a, "a")
        op = "mkernel.GemmAr.run"
        out_grad_refused(op, out)
        inputs_grad_refused(op, a, b)
        _check_shape(a, "a", (m, k), op=op)
        _check_shape(b, "b", (n, k), a.device, op=op)
        if out is None:
            out = a.new_empty((m, n))
        _check_shape(out, "out", (m, n), a.device, op=op)
        check_apart(op, "out", out, ("a", a), ("b", b))
        return bump_version(self._launch(a, b, out))

    def _launch(self, a, b, out):  # checked by the caller
        self._lib_call("mkernel.GemmAr.run", lib.mk_gemm_ar_run, self._h, a.data_ptr(), b.data_ptr(), out.data_ptr(),
                       _stream(a.get_device()))
        return out

    def all_reduce(self, x, out=None):
        """out [m, n] = sum over ranks of x [m, n] (the plan's k_local is not used)."""
        m, n, _ = self.shape
        self._open(x, "x")
        op = "mkernel.GemmAr.all_reduce"
        out_grad_refused(op, out)
        inputs_grad_refused(op, x)
        _check_shape(x, "x", (m, n), op=op)
        if out is None:
            out = x.new_empty((m, n))
        _check_shape(out, "out", (m, n), x.device, op=op)
        check_apart(op, "out", out, ("x", x), same_ok=True)
        return bump_version(self._launch_all_reduce(x, out))

    def _launch_all_reduce(self, x, out):  # checked by the caller
        self._lib_call("mkernel.GemmAr.all_reduce", lib.mk_gemm_ar_all_reduce, self._h, x.data_ptr(), out.data_ptr(),
                       _stream(x.get_device()))
        return out


# ---- checks and library calls (eager; the custom ops' implementations): as tp.py's --------------

def _gemm_ar_run(a, b, key, out=None):
    try:
        shape = _shape(gemm_ar_shape, a.shape, b.shape, world(key))
    except Mismatch as e:  # (b against a: on a shape's first call, after the plan check)
        refuse_pair(e, _plan, _PLANS, GemmAr, key, a, b)
    out = _output(out, shape, a, key, "gemm_ar", ("a", a), ("b", b))
    plan = _plan(GemmAr, key, a.shape[0], b.shape[0], a.shape[1])
    plan._launch(a, b, out)
    _hot_add("gemm_ar", key, a, b, plan._launch, out.shape)
    return out


def _all_reduce_run(x, key, out=None):
    out = _output(out, _shape(all_reduce_shape, x.shape, world(key)), x, key, "all_reduce", ("x", x), same_ok=True)
    # Two-shot (one_shot 0): all_reduce() never takes run()'s one-shot path, whose staging (up to m x n bf16 of
    # symmetric memory per node peer) a plan of the crossover's choice would hold for nothing.
    plan = _plan(GemmAr, key, x.shape[0], x.shape[1], _COLLECTIVE_N, 0, 0, 0)
    plan._launch_all_reduce(x, out)
    _hot_add("all_reduce", key, x, None, plan._launch_all_reduce, out.shape)
    return out


# ---- custom ops ----------------------------------------------------------------------------------
# Schemas (torch.ops.mkernel.*), comm being the registry key:
#   gemm_ar(Tensor a, Tensor b, SymInt comm) -> Tensor
#   all_reduce(Tensor x, SymInt comm) -> Tensor
#   gemm_ar_out / all_reduce_out: the same inputs, then Tensor(a!) out -> ()

@torch.library.custom_op("mkernel::gemm_ar", mutates_args=())
def _gemm_ar_op(a: torch.Tensor, b: torch.Tensor, comm: int) -> torch.Tensor:
    a, b = dense16(a), dense16(b)
    _check_inputs("gemm_ar", ("a", a), ("b", b))
    return _gemm_ar_run(a, b, comm)


@_gemm_ar_op.register_fake
def _(a, b, comm):
    _check_meta("gemm_ar", ("a", a), ("b", b))
    return a.new_empty(gemm_ar_shape(a.shape, b.shape, world(comm)))


@torch.library.custom_op("mkernel::all_reduce", mutates_args=())
def _all_reduce_op(x: torch.Tensor, comm: int) -> torch.Tensor:
    x = dense16(x)
    _check_inputs("all_reduce", ("x", x))
    return _all_reduce_run(x, comm)


@_all_reduce_op.register_fake
def _(x, comm):
    _check_meta("all_reduce", ("x", x))
    return x.new_empty(all_reduce_shape(x.shape, world(comm)))


# out= variants (mutating, no autograd: the wrappers refuse out= when autograd must record).

@torch.library.custom_op("mkernel::gemm_ar_out", mutates_args=("out",))
def _gemm_ar_out_op(a: torch.Tensor, b: torch.Tensor, comm: int, out: torch.Tensor) -> None:
    a, b = dense16(a), dense16(b)
    _check_inputs("gemm_ar", ("a", a), ("b", b))
    _gemm_ar_run(a, b, comm, out)


@_gemm_ar_out_op.register_fake
def _(a, b, comm, out):
    _check_meta("gemm_ar", ("a", a), ("b", b))
    _check_out_meta("gemm_ar", "out", out, gemm_ar_shape(a.shape, b.shape, world(comm)))


@torch.library.custom_op("mkernel::all_reduce_out", mutates_args=("out",))
def _all_reduce_out_op(x: torch.Tensor, comm: int, out: torch.Tensor) -> None:
    x = dense16(x)
    _check_inputs("all_reduce", ("x", x))
    _all_reduce_run(x, comm, out)


@_all_reduce_out_op.register_fake
def _(x, comm, out):
    _check_meta("all_reduce", ("x", x))
    _check_out_meta("all_reduce", "out", out, all_reduce_shape(x.shape, world(comm)))


# ---- autograd ------------------------------------------------------------------------------------
# tp.py's convention: W ranks, rank r holds the shards named _r, L = sum_r L_r(outputs of rank r)
# (as for all_gather, whose output is also the same on every rank). NOTES: code that computes one
# loss the same way on every rank and wants its gradient counted once (Megatron's row-parallel
# layer: identity backward) must divide it by W, or reduce only one rank's loss.

def _gemm_ar_setup(ctx, inputs, output):
    a, b, key = inputs
    ctx.key = key
    ctx.save_for_backward(a, b)


def _gemm_ar_backward(ctx, grad_out):
    # Forward on rank r: out_r = Y = sum_s a_s b_s^T [M, n] on every rank, a_s [M, k_s] and b_s
    # [n, k_s] rank s's (row-parallel) shards. Every out_r is Y, so dL/dY = sum_r grad_out_r =: G,
    # the all-reduce of the output gradients (the same on every rank):
    #  - dL/da_r = G b_r [M, k_r],  dL/db_r = G^T a_r [n, k_r] (torch GEMMs, fp32 accumulation).
    a, b = ctx.saved_tensors
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    grad_a = grad_b = None
    if need_a or need_b:
        g = torch.ops.mkernel.all_reduce(grad_out.contiguous(), ctx.key)
        if need_a:
            grad_a = g @ b
        if need_b:
            grad_b = g.t() @ a
    return grad_a, grad_b, None


def _all_reduce_setup(ctx, inputs, output):
    ctx.key = inputs[1]


def _all_reduce_backward(ctx, grad):
    # out_r = sum_s x_s on every rank: x_s reaches every rank's output once, so
    # dL/dx_s = sum_r grad_r = all_reduce(grad), the same on every rank.
    return torch.ops.mkernel.all_reduce(grad.contiguous(), ctx.key), None


_gemm_ar_op.register_autograd(_gemm_ar_backward, setup_context=_gemm_ar_setup)
_all_reduce_op.register_autograd(_all_reduce_backward, setup_context=_all_reduce_setup)


# ---- public functions ----------------------------------------------------------------------------

def gemm_ar(a, b, comm, out=None):
    """Sum over ranks of a @ b^T, on every rank (the same bits everywhere): a [m, k_local],
    b [n, k_local] (nn.Linear layout) -> [m, n].

    n and k_local multiples of 64, m a multiple of the world (any rows per rank), at most 8 ranks.
    """
    hot = _hot("gemm_ar", comm, out, a, b)
    if hot is not None:
        return hot
    _check_inputs("gemm_ar", ("a", a), ("b", b))
    return _dispatch("gemm_ar", _gemm_ar_run, (a, b, _key(comm)), _grad(a, b), out)


def all_reduce(x, comm, out=None):
    """Sum over ranks of x, on every rank: x [m, n] bf16 -> [m, n].

    n a multiple of 64, m a multiple of the world (any rows per rank), at most 8 ranks.
    """
    hot = _hot("all_reduce", comm, out, x)
    if hot is not None:
        return hot
    _check_inputs("all_reduce", ("x", x))
    return _dispatch("all_reduce", _all_reduce_run, (x, _key(comm)), _grad(x), out)
