# call A (session 56): mk_gpu_tests (session 55's C ABI changes: handle kinds, function-named errors,
# attention_workspace_bytes shape checks; this session's CApiGpu.ABufferFreedThroughAnotherCommunicatorIsRefused),
# then tools/gpu_test.sh python as a whole on one GPU (its skip rule and interpreter choice had only run in the
# compiled part; pytest tests/python/gpu and every shared-GPU torchrun check). Carries build/bin build/lib.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=70 run build/bin/mk_gpu_tests > $OUT/mk_gpu_tests.log 2>&1; echo "mk_gpu_tests fail=$fail"
tail -4 $OUT/mk_gpu_tests.log
MK_GPU_TEST_STEP_S=200 timeout 440 tools/gpu_test.sh python > $OUT/gpu_test_python.log 2>&1; echo "gpu_test python rc $?"
grep -E "^(ok|FAIL|SKIP|step)|passed|failed|SKIPPED|rc=" $OUT/gpu_test_python.log | cut -c1-200 | tail -30
