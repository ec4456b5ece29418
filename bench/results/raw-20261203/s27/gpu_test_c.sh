cd "$(dirname "$0")/../../../.." && mkdir -p $OUT/c && MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh > $OUT/c/gpu_test.log 2>&1  # call C (run inline)
