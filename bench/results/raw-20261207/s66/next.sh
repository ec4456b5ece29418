# Session 66, call 4: this session's commits on one GPU. MK_SHARE_GPUS spelt "true"/"on" (942465b: mk_dist_tests,
# dist_ring_attn_check.py's short run at 4 ranks), dist_tp_check.py's one-write OK lines (78eb24e), and
# tools/sanitize_gpu.sh's MK_SANITIZE_* knobs (ccbaede). Carry `build/bin build/lib`. Bounded; ~4 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
py="env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so"
step_s=120 run tools/mkrun -n 2 --timeout 110 env MK_SHARE_GPUS=true MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
  --gtest_filter='AgGemmTest.MatchesReferenceAcrossShapes*:GemmArTest.StandaloneAllReduce*'
step_s=120 run $py MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 python3 -m torch.distributed.run --standalone \
  --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
step_s=150 run $py MK_SHARE_GPUS=on MK_TIMEOUT_MS=60000 python3 -m torch.distributed.run --standalone \
  --nproc_per_node=4 tests/python/gpu/dist_ring_attn_check.py
san=${OUT:-/tmp}/sanitize
step_s=150 run env MK_SANITIZE_STEP_S=120 MK_SANITIZE_GPU_FILTER='GemmHooks.*' tools/sanitize_gpu.sh memcheck "$san" gpu
echo "fail=$fail"
