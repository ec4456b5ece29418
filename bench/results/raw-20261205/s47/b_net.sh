# call B (session 47): `tools/gpu_test.sh fabric verbs` at the session's network changes, with its new verbs steps
# (the deregister drain over a 300 ms wire, SOFTVERBS_WIRE_DELAY_MS; the refused-transport scenario, softverbs
# lacking atomics on rank 1), then the drain test against a library built without the drain (.carry/lib_nodrain,
# network.cpp's drain_proxy call removed), which must fail.
# Carries build/bin build/lib .carry/rdma build/softverbs .carry/lib_nodrain.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 500 tools/gpu_test.sh fabric verbs > $OUT/b/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log | cut -c1-250
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error\|deregistering anyway\|->" $OUT/b/gpu_test.log | cut -c1-400 | head -30
echo "--- A/B: the drain test with the library without the drain (must fail)"
timeout 80 tools/mkrun -n 2 --timeout 70 env LD_LIBRARY_PATH=$PWD/.carry/lib_nodrain:$PWD/build/softverbs:$LD_LIBRARY_PATH \
  CUDA_DEVICE_MAX_CONNECTIONS=32 SOFTVERBS_WIRE_DELAY_MS=300 MK_RANKS_PER_NODE=1 MK_NET=verbs MK_SHARE_GPUS=1 \
  MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter=Net.DeregisteringWaitsForEveryPushedCommand \
  > $OUT/b/nodrain.log 2>&1
echo "nodrain rc=$?"
grep -h "Failure\|Expected\|Which is\|still in flight\|error\|OK \]\|FAILED" $OUT/b/nodrain.log | cut -c1-300 | head -20
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
