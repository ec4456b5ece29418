"""Ring attention never hangs: a rank whose peer does not call ends with an error naming the wait
(device machine, 2 GPUs, run last in its process: the failed kernel leaves the CUDA context unusable):

    PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so MK_TIMEOUT_MS=1000 \\
        torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_timeout.py

Both ranks make the plan and call once (it works); then rank 0 calls again and rank 1 does not. Rank 0's
call must fail within a few timeouts (MK_TIMEOUT_MS), and the communicator's record must say which device
wait gave up. Exits non-zero otherwise (a hang is ended by the caller's timeout)."""
import os
import time

import torch
import torch.distributed as dist

import mkernel
import mkernel.torchrun


def run(comm, rank, world):
    timeout_s = int(os.environ.get("MK_TIMEOUT_MS", "0")) / 1000
    assert 0 < timeout_s <= 10, "set MK_TIMEOUT_MS (at most 10000) so that the failing wait ends soon"
    b, s, h, d = 1, 256, 4, 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda").bfloat16() for _ in range(3))
    mkernel.ring_attention(q, k, v, comm)  # both ranks: plan made, one call
    torch.cuda.synchronize()
    dist.barrier()
    if rank == 0:
        t0 = time.monotonic()
        try:
            mkernel.ring_attention(q, k, v, comm)  # rank 1 does not call: its entry signal never comes
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - the CUDA error of the trapped kernel
            waited = time.monotonic() - t0
            record = ""
            try:
                comm.check()
            except mkernel.MkernelError as m:
                record = str(m)
            print(f"rank 0: the call failed after {waited:.1f} s: {type(e).__name__}: {str(e)[:120]}", flush=True)
            print(f"rank 0: device record: {record}", flush=True)
            assert waited < 8 * timeout_s + 10, f"the failure took {waited:.1f} s (MK_TIMEOUT_MS {timeout_s * 1e3:.0f})"
            assert "wait" in record.lower(), "the communicator recorded no failed device wait"
            print("ok ring attention timeout", flush=True)
        else:
            raise AssertionError("rank 0's call succeeded although rank 1 never called")
    dist.barrier()  # gloo: no CUDA
    # The CUDA context of rank 0 is unusable after the trap: no collective teardown.
    os._exit(0)


if __name__ == "__main__":
    mkernel.torchrun.main(run)
