"""Boilerplate for scripts launched with torchrun (one process per GPU):

    import mkernel.torchrun
    def run(comm, rank, world): ...
    if __name__ == "__main__":
        mkernel.torchrun.main(run)

Selects the GPU from LOCAL_RANK, starts torch.distributed (gloo unless told
otherwise) and an mkernel communicator, calls run(comm, rank, world), and
when it raises prints the library's record of which device wait gave up (a
trapped kernel otherwise shows only a generic CUDA error). Tears down
collectively on success. Scripts with a set-up of their own get the same
report by running their body inside `with mkernel.torchrun.reported(comm):`.
"""
import contextlib
import os

import torch
import torch.distributed as dist

from . import MkernelError, init
from ._lib import knob_bool


@contextlib.contextmanager
def reported(comm, rank=None):
    """When the body raises, prints which device wait of this rank gave up, if one did (the library's
    record: role, block, signal, peer, what it saw), then lets the exception go on."""
    try:
        yield
    except Exception:
        if not getattr(comm, "closed", False):  # (a closed one has no record: the body's exception alone goes on)
            try:
                comm.check()
            except MkernelError as e:
                print(f"rank {comm.rank if rank is None else rank}: device: {e}", flush=True)
        raise


def _env_int(name, default):
    """The launcher's variable `name` as an int >= 0, or a SystemExit naming it (int() said only "invalid
    literal")."""
    v = os.environ.get(name, default)
    if not (v.strip().isascii() and v.strip().isdigit()):  # (isdigit alone takes "²", which int() refuses)
        raise SystemExit(f"mkernel.torchrun: {name}={v!r} is not a non-negative integer (the launcher sets it, "
                         f"as torchrun does; unset, it is {default})")
    return int(v)


def main(run, backend="gloo"):
    # Kernels loaded on first use block the network proxy's copies while a kernel waits (README, "Kernels loaded
    # on first use"): eager loading, as tools/mkrun sets it, unless the caller chose; it counts only before CUDA
    # starts (torch.cuda.device_count below may start it where NVML is missing).
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
    local = _env_int("LOCAL_RANK", "0")
    # testing only: local rank mod GPUs (the knob read by the library's parser: a bad value raises, naming it)
    if knob_bool("MK_SHARE_GPUS"):
        gpus = max(1, torch.cuda.device_count())
        local_world = _env_int("LOCAL_WORLD_SIZE", "1")
        if "nccl" in backend and local_world > gpus:  # said before anything starts, not as NCCL's invalid usage
            raise SystemExit(f"mkernel.torchrun: {local_world} local ranks would share {gpus} GPU(s) "
                             f"(MK_SHARE_GPUS=1), and the torch.distributed backend {backend!r} uses NCCL, which "
                             "refuses two ranks on one GPU: run one rank per GPU, or without NCCL")
        local %= gpus
    torch.cuda.set_device(local)
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = init()
    with reported(comm, rank):
        run(comm, rank, world)
    comm.close()  # frees the cached op plans too (collective)
    dist.destroy_process_group()
