cd "$(dirname "$0")/../../../.." && mkdir -p $OUT/b && MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh > $OUT/b/gpu_test.log 2>&1  # call B (run inline), carrying build/bin build/lib .carry/rdma
