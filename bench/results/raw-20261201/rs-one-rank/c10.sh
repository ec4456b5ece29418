#!/usr/bin/env bash
# 1 GPU: the whole GPU test command at the current tree (validates 5259639 and 40017b0 on a GPU).
cd "$(dirname "$0")/.."
t0=$(date +%s)
MK_GPU_TEST_STEP_S=200 tools/gpu_test.sh > $OUT/gpu_test.log 2>&1; echo "gpu_test rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "^=== |legacy default stream" $OUT/gpu_test.log | cut -c1-220
