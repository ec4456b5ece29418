#!/usr/bin/env bash
# 1 GPU: the whole GPU test suite on the fused-buffer change (plans that never launch their fused kernel
# allocate none of its buffers; ring attention on one rank without a gathered buffer).
export LD_LIBRARY_PATH=$PWD/.carry/rdma:$LD_LIBRARY_PATH
MK_GPU_TEST_STEP_S=150 timeout 580 tools/gpu_test.sh > $OUT/gpu_test.log 2>&1; echo "gpu_test rc=$?"
grep -E "^=== (PASSED|FAILED|SKIPPED)|^\[  (PASSED|FAILED) |^ok one rank|Failure|Error" $OUT/gpu_test.log | head -60
