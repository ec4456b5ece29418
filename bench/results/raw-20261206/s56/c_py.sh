# call C (session 56): the Python after call A's failure (Mismatch with an __init__ of its own stopped torch.compile's
# tracing in dist_ring_attn_check on Python 3.12): pytest tests/python/gpu; dist_ring_attn_check at 1 rank, 2 ranks
# sharing the GPU (1x2 and 2x1 emu), now with k/v mismatched on rank 1 alone on a first call; dist_tp_check at 2
# ranks sharing it, now with b mismatched on rank 1 alone on a first call. Carries build/bin build/lib.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
tr=(python3 -m torch.distributed.run --standalone)
step_s=90 run "${e[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
step_s=80 run "${e[@]}" "${tr[@]}" --nproc_per_node=1 tests/python/gpu/dist_ring_attn_check.py
step_s=80 run "${e[@]}" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
step_s=80 run "${e[@]}" MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 \
    tests/python/gpu/dist_ring_attn_check.py
step_s=80 run "${e[@]}" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
echo "fail=$fail"
exit $fail
