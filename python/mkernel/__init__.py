"""mkernel: multi-GPU, multi-node fused kernels for Hopper GPUs.

    import mkernel
    comm = mkernel.init()            # inside torchrun: bootstrap via torch.distributed's store
    comm = mkernel.Communicator.from_env()   # or from the launcher environment directly

    out = mkernel.gemm(a, b)         # ops take torch tensors (mkernel/ops.py)
    out = mkernel.ag_gemm(x_shard, w, comm)   # tensor-parallel ops (mkernel/tp.py, tp_ar.py): ag_gemm,
    y = mkernel.reduce_scatter(x, comm)       # gemm_rs, gemm_ar, all_gather, reduce_scatter, all_reduce
                                              # (torch custom ops, autograd)
    x_local = mkernel.zigzag_shard(x, rank, world)   # sequence-parallel layout helpers (mkernel/zigzag.py,
                                                     # pure torch): zigzag_unshard, zigzag_positions

Importing needs no GPU and no torch (ops import torch on first use). Library
errors raise MkernelError.
"""
import ctypes
import math
import sys

from ._lib import MkernelError, UniqueId, CommInfo, SymmInfo, c_int_arg, check, lib, path as library_path
from . import _tp_meta

__all__ = ["MkernelError", "Communicator", "SymmetricBuffer", "get_unique_id", "init", "print_config", "net_backends",
           "library_path", "gemm", "gemm_ptr", "gemm_workspace_bytes", "ag_gemm", "gemm_rs", "all_gather",
           "reduce_scatter", "gemm_ar",
           "all_reduce", "AgGemm", "GemmRs", "GemmAr", "close_plans", "zigzag_shard", "zigzag_unshard",
           "zigzag_positions", "attention", "ring_attention", "RingAttention"]

from ._ops_c import gemm_ptr, gemm_workspace_bytes  # noqa: E402  (pointer-level ops: no torch needed)


_TORCH_OPS = {"gemm": "ops", "ag_gemm": "tp", "gemm_rs": "tp", "all_gather": "tp", "reduce_scatter": "tp",
              "AgGemm": "tp", "GemmRs": "tp", "close_plans": "tp",
              "gemm_ar": "tp_ar", "all_reduce": "tp_ar", "GemmAr": "tp_ar",
              "zigzag_shard": "zigzag", "zigzag_unshard": "zigzag", "zigzag_positions": "zigzag",
              "attention": "_attention", "ring_attention": "_ring_attention", "RingAttention": "_ring_attention"}


def __getattr__(name):
    # Tensor ops import torch: loaded on first use.
    if name in _TORCH_OPS:
        import importlib
        value = getattr(importlib.import_module("." + _TORCH_OPS[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mkernel' has no attribute {name!r}")


def print_config() -> str:
    """The table of every MK_* environment knob with its default and current value."""
    buf = ctypes.create_string_buffer(1 << 16)
    check(lib.mk_print_config(buf, len(buf)))
    return buf.value.decode()


def net_backends() -> list:
    """The network backends the library was built with (MK_NET takes these), in MK_NET=auto's order: ["verbs",
    "fabric", "emu"] where its build found the RDMA headers (CMake's MK_NET_BACKENDS), down to ["emu"] (one host)."""
    return lib.mk_net_backends().decode().split()


def get_unique_id() -> bytes:
    """NCCL-style id (128 bytes): create on one rank, share it, pass it to Communicator."""
    uid = UniqueId()
    check(lib.mk_get_unique_id(ctypes.byref(uid)))
    return bytes(uid.internal)


class SymmetricBuffer:
    """A collective allocation: this rank's device pointer and its node peers'. Freed by free() or with its
    communicator (close()); then its pointers must not be used."""

    def __init__(self, comm, handle):
        self._comm, self._h = comm, handle
        info = SymmInfo()
        check(lib.mk_symm_info(handle, ctypes.byref(info)))
        self.ptr = info.local
        self.nbytes = info.bytes
        self.peer_ptrs = [info.peers[i] for i in range(info.local_size)]

    def free(self):
        """Collective."""
        if self._h:
            if not getattr(self._comm, "_h", None):  # (its communicator freed it when it closed)
                check(lib.mk_symm_free(None, self._h))  # (deletes the handle alone: the library knows it was freed)
                self._h = None
                return
            self._comm._lib_call("mkernel.SymmetricBuffer.free", lib.mk_symm_free, self._h)
            self._h = None


class Communicator:
    """All ranks of a job; creating one is collective (see include/mkernel/communicator.hpp)."""

    def __init__(self, rank: int, world: int, unique_id: bytes, device: int = -1):
        if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != 128:
            raise MkernelError("mkernel: unique_id must be the 128 bytes from get_unique_id()")
        op = "mkernel.Communicator"
        rank, world = c_int_arg(rank, "rank", op), c_int_arg(world, "world", op, 1)
        device = c_int_arg(device, "device", op)
        uid = UniqueId()
        ctypes.memmove(uid.internal, bytes(unique_id), 128)
        h = ctypes.c_void_p()
        check(lib.mk_comm_init(ctypes.byref(h), rank, world, ctypes.byref(uid), device))
        self._h = h
        self._adopt()

    def _adopt(self):
        """After the library made the communicator (self._h): its registry key and what the ops read of it. A
        failure here destroys the handle (it would leak, and its peers' later steps would wait for it)."""
        try:
            self._uid = _tp_meta.new_key(self.world)
            self._opened()
        except BaseException:
            h, self._h = self._h, None
            lib.mk_comm_destroy(h)
            raise

    def _opened(self):
        """After the library made the communicator: what the ops read of it."""
        self._device = self.info()["device"]  # the ops check their tensors and the current device against it
        self._explicit_plans = []  # the plans made on it (mkernel.AgGemm, ...), in order: close() closes them
        _tp_meta.register(self)  # known to the TP custom ops, also in code that only runs under torch.compile

    @classmethod
    def from_env(cls, device: int = -1) -> "Communicator":
        """From torchrun / tools/mkrun / OpenMPI / Slurm variables (a single rank without any)."""
        self = cls.__new__(cls)
        h = ctypes.c_void_p()
        check(lib.mk_comm_init_env(ctypes.byref(h), c_int_arg(device, "device", "mkernel.Communicator.from_env")))
        self._h = h
        self._adopt()
        return self

    @property
    def _open_h(self):
        """The handle; a clear error once close() ran (the library would say only that it is NULL)."""
        h = getattr(self, "_h", None)
        if not h:
            raise MkernelError("mkernel: this communicator is closed")
        return h

    @property
    def closed(self) -> bool:
        """True once close() ran (every call but close() then raises MkernelError)."""
        return not getattr(self, "_h", None)

    def _lib_call(self, name, fn, *args):
        """check(fn(handle, *args)), this communicator marked in flight as `name` meanwhile: a close() on another
        thread refuses while it is (_tp_meta.marked_call; the library refuses its destroy likewise)."""
        _tp_meta.marked_call(self, name, fn, self._open_h, *args)

    def info(self) -> dict:
        ci = CommInfo()
        self._lib_call("mkernel.Communicator.info", lib.mk_comm_info, ctypes.byref(ci))
        return {name: getattr(ci, name) for name, _ in CommInfo._fields_}

    @property
    def rank(self) -> int:
        return self.info()["rank"]

    @property
    def world(self) -> int:
        return self.info()["world"]

    def barrier(self):
        self._lib_call("mkernel.Communicator.barrier", lib.mk_comm_barrier)

    def _allgather(self, mine):
        """Collective: every rank's `mine` (bytes, the same length on every rank), in rank order."""
        n, w = len(mine), self.world
        buf = ctypes.create_string_buffer(n * w or 1)
        self._lib_call("mkernel.Communicator._allgather", lib.mk_comm_allgather, mine, n, buf)
        return [buf.raw[r * n:(r + 1) * n] for r in range(w)]

    def check(self):
        """Raises MkernelError if a device wait of this rank failed or an abort was raised."""
        self._lib_call("mkernel.Communicator.check", lib.mk_comm_check)

    def network_bytes_put(self) -> int:
        """Payload bytes of the puts this rank's host proxy has taken so far (0 on one node); exact for a
        call once every rank synchronised it and passed a barrier."""
        n = ctypes.c_uint64()
        self._lib_call("mkernel.Communicator.network_bytes_put", lib.mk_comm_network_bytes_put, ctypes.byref(n))
        return n.value

    def symmetric_bytes(self) -> int:
        """Bytes of symmetric memory this rank holds now: the cached op plans' staging and gathered buffers
        and the signal region, as mapped. MK_SYMM_MAX_BYTES bounds it; mkernel.close_plans(comm) gives the
        plans' back."""
        n = ctypes.c_uint64()
        self._lib_call("mkernel.Communicator.symmetric_bytes", lib.mk_comm_symmetric_bytes, ctypes.byref(n))
        return n.value

    def alloc_symmetric(self, nbytes: int) -> SymmetricBuffer:
        """Collective: equal-size device buffers on every rank, peers mapped inside the node."""
        # Every int size goes through the library's size exchange, so a bad one on one rank fails every rank at
        # once (raised here, it left the others waiting there until the bootstrap bound): a negative one as 0
        # (ctypes would wrap it to ~2^64; the library refuses 0 after the exchange), one past size_t as its
        # largest (larger than any device memory). What is not an int (1.5, "4096") has no size to send: ctypes
        # would truncate or refuse it, so it is refused here, on this rank.
        n = c_int_arg(nbytes, "nbytes", "mkernel.alloc_symmetric", -math.inf, math.inf)
        n = min(max(n, 0), (1 << 64) - 1)
        h = ctypes.c_void_p()
        self._lib_call("mkernel.Communicator.alloc_symmetric", lib.mk_symm_alloc, n, ctypes.byref(h))
        return SymmetricBuffer(self, h)

    def close(self):
        """Collective. Closes this communicator's cached op plans first, then the plans made on it by hand
        (mkernel.AgGemm, GemmRs, GemmAr, RingAttention) that are still open, in the order they were made:
        a plan refers to its communicator. Those plans then refuse to run. Raises, closing nothing, while a plan
        is being made on it, one of its own calls (barrier, alloc_symmetric, ...) or a call of one of those plans
        is in the library (on another thread)."""
        if getattr(self, "_h", None):
            tp = sys.modules.get(__name__ + ".tp")  # loaded only if an op was used
            cached = [p for k, p in list(tp._PLANS.items()) if k[1] == self._uid] if tp is not None else []
            _tp_meta.refuse_close_in_flight("mkernel.Communicator.close", self,
                                            cached + list(getattr(self, "_explicit_plans", ())))
            if tp is not None:
                tp.close_plans(self)
            for plan in getattr(self, "_explicit_plans", ()):
                plan.close()  # (closed ones, e.g. the cache's: nothing)
            self._explicit_plans = []
            check(lib.mk_comm_destroy(self._h))
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # Closing is collective: after an exception the other ranks may be elsewhere (in an op, or gone),
        # so a close here would wait for them up to MK_BOOTSTRAP_TIMEOUT_MS and hide the exception under
        # its own. The communicator is left open (its memory goes with the process, or call close()).
        if exc_type is None:
            self.close()


def init(group=None, device: int = -1) -> Communicator:
    """Bootstrap from torch.distributed: rank 0 of `group` makes the unique id and
    shares it through the process group's store (works under torchrun on one or
    several nodes; MK_RANKS_PER_NODE is respected by the library). Every rank of
    the group calls it, in the same order as its other inits on the group, within
    MK_BOOTSTRAP_TIMEOUT_MS of group rank 0; a rank that waits longer raises,
    naming rank 0."""
    import torch.distributed as dist  # only needed here

    if not dist.is_initialized():
        raise MkernelError("mkernel.init: torch.distributed is not initialized (call init_process_group first)")
    rank = dist.get_rank(group)
    world = dist.get_world_size(group)
    from ._torch_id import share_unique_id
    uid = share_unique_id(group, get_unique_id)  # bounded by MK_BOOTSTRAP_TIMEOUT_MS, naming rank 0 if it fails
    # After the exchange, which counts this call on every rank (_torch_id: a rank that raised before it fell out of
    # step with rank 0 for good). A device number out of range is the library's to refuse: inside the bootstrap,
    # which then fails every rank at once, naming this one (Communicator::init_or_abort).
    device = c_int_arg(-1 if device is None else device, "device", "mkernel.init", -1)
    if device < 0:
        import torch
        device = torch.cuda.current_device()
    return Communicator(rank, world, uid, device)
