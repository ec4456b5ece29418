#!/usr/bin/env bash
# 1 GPU: the whole GPU tier at HEAD (tools/gpu_test.sh: ranks share the GPU for the dist and torchrun steps).
cd "$(dirname "$0")/.."
MK_GPU_TEST_STEP_S=200 tools/gpu_test.sh > $OUT/gpu_test.log 2>&1; echo "gpu_test rc=$?"
grep -E "^=== " $OUT/gpu_test.log
