"""GPU check of mkernel.init() under torchrun (2 processes):
    torchrun --nproc_per_node=2 tests/python/dist_init_check.py
Bootstraps mkernel through torch.distributed's process group, checks the
topology against torch's view, makes a symmetric allocation and verifies the
peer mapping with torch copies, and exits non-zero on any mismatch."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import mkernel  # noqa: E402


def main():
    local = int(os.environ["LOCAL_RANK"])
    if mkernel._lib.knob_bool("MK_SHARE_GPUS"):  # ranks sharing the GPUs there are (one-GPU runs)
        local %= torch.cuda.device_count()
    torch.cuda.set_device(local)
    dist.init_process_group("gloo")
    comm = mkernel.init()
    info = comm.info()
    assert info["rank"] == dist.get_rank() and info["world"] == dist.get_world_size(), info
    assert info["device"] == local, info
    buf = comm.alloc_symmetric(1 << 20)
    assert len(buf.peer_ptrs) == info["local_size"]
    comm.barrier()
    print(f"rank {info['rank']}: {info}, library {mkernel.library_path}", flush=True)
    buf.free()
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
