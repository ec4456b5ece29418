# Session 62, with the device time left: gpu_test.sh python's torchrun checks with 2 ranks sharing the GPU (the TP
# ops, ring attention, the ring timeout), as that script runs them; not run since session 58-61's library changes.
# Each step bounded; ~2-3 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
env_=(env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1)
tr=(python3 -m torch.distributed.run --standalone --nproc_per_node=2)
step_s=100 run "${env_[@]}" MK_TIMEOUT_MS=60000 "${tr[@]}" tests/python/gpu/dist_tp_check.py
step_s=100 run "${env_[@]}" MK_TIMEOUT_MS=60000 "${tr[@]}" tests/python/gpu/dist_ring_attn_check.py
step_s=60 run "${env_[@]}" MK_TIMEOUT_MS=1000 "${tr[@]}" tests/python/gpu/dist_ring_attn_timeout.py
echo "fail=$fail"
