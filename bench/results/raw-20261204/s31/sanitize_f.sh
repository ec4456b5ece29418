# call F (session 31; a first start was refused): after call E's findings. The tree: the test helper hold_sms without system-scope atomics
# on host memory (memcheck rejected them and the context's sticky error failed every test after it), the agent's
# poll flag read by lane 0 alone (racecheck's one warning in our kernels). memcheck over the whole dist tier 1x2
# (2 ranks sharing the GPU); the agent change's tests (the dist tier 2x1 emu, time-sliced; the agent GPU tests);
# racecheck over mk_gpu_tests without cuBLAS's kernels (the attention engine's racecheck: not run, the device time left). Carries build/bin build/lib.
mkdir -p $OUT/f
source tools/gpu_env.sh; source tools/gpu_steps.sh
SANITIZE_STEP_S=140 SANITIZE_DIST_FILTER='*:-Dist.PingPong*' tools/sanitize_gpu.sh memcheck $OUT/f dist; echo "rc=$?"
step_s=110 run tools/mkrun -n 2 --timeout 105 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 \
  build/bin/mk_dist_tests > $OUT/f/dist_2x1_emu.log 2>&1
grep -h '^=== ' $OUT/f/dist_2x1_emu.log | tail -2; grep -c '^\[       OK' $OUT/f/dist_2x1_emu.log
step_s=30 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' > $OUT/f/gpu_agent.log 2>&1
grep -h '^=== \|PASSED\|FAILED' $OUT/f/gpu_agent.log | tail -3
SANITIZE_STEP_S=50 tools/sanitize_gpu.sh racecheck $OUT/f gpu; echo "rc=$?"
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
