# call F (session 57): session 56's last merges, at last on a GPU: the failed-teardown scenario (device failure
# aborts the bootstrap at release: leave_after_device_failure); dist_ring_attn_check at 1x2 and 2x1 emu (the ring's
# _plan_shape, on the first-call refusal too); dist_tp_check at 2 ranks; the whole mk_gpu_tests (with the spin
# test's covering spin and the cached top clock). Ranks share the one GPU. Carries build/bin build/lib.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
tr=(python3 -m torch.distributed.run --standalone)
step_s=60 run tools/mkrun -n 2 --timeout 50 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --failed-teardown-scenario
step_s=80 run "${e[@]}" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
step_s=80 run "${e[@]}" MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 \
    tests/python/gpu/dist_ring_attn_check.py
step_s=80 run "${e[@]}" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
step_s=90 run build/bin/mk_gpu_tests
echo "fail=$fail"
exit $fail
