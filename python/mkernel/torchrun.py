"""Boilerplate for scripts launched with torchrun (one process per GPU):

    import mkernel.torchrun
    def run(comm, rank, world): ...
    if __name__ == "__main__":
        mkernel.torchrun.main(run)

Selects the GPU from LOCAL_RANK, starts torch.distributed (gloo unless told
otherwise) and an mkernel communicator, calls run(comm, rank, world), and
when it raises prints the library's record of which device wait gave up (a
trapped kernel otherwise shows only a generic CUDA error). Tears down
collectively on success.
"""
import os

import torch
import torch.distributed as dist

from . import MkernelError, init


def main(run, backend="gloo"):
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if os.environ.get("MK_SHARE_GPUS", "0") == "1":  # testing only (the knob): local rank mod GPUs
        local %= max(1, torch.cuda.device_count())
    torch.cuda.set_device(local)
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    comm = init()
    try:
        run(comm, rank, world)
    except Exception:
        try:
            comm.check()
        except MkernelError as e:
            print(f"rank {rank}: device: {e}", flush=True)
        raise
    comm.close()  # frees the cached op plans too (collective)
    dist.destroy_process_group()
