# call B (session 36): probe of AgGemmTest.APlanWhoseBufferCannotBeFreedKeepsItOnEveryRank's pending
# cudaErrorStreamCaptureUnsupported (branch probe36: MK_PROBE prints), then tools/gpu_test.sh python at 9321f19's library.
mkdir -p $OUT/b
source tools/gpu_env.sh
F=--gtest_filter=AgGemmTest.APlanWhoseBufferCannotBeFreedKeepsItOnEveryRank:AgGemmTest.HundredBackToBackCallsWithChangingInputs
timeout 60 tools/mkrun -n 2 --timeout 50 env MK_PROBE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests $F > $OUT/b/probe_1x2.log 2>&1; echo "probe 1x2 rc=$?"
grep -h "PROBE\|FAILED\|exception\|OK \]" $OUT/b/probe_1x2.log | cut -c1-250 | head -60
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh python > $OUT/b/gpu_test_python.log 2>&1
echo "gpu_test python rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test_python.log
grep -h "FAILED\|Error\|error:" $OUT/b/gpu_test_python.log | cut -c1-300 | head -20
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
