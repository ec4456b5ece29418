#!/usr/bin/env bash
# 1 GPU: the GPU tier at 0cfad93 (the merged stmatrix epilogue + butterfly quad transpose).
tools/gpu_test.sh > $OUT/gpu_test.log 2>&1; echo "gpu_test rc=$?"
grep -E '^=== (PASSED|FAILED|SKIPPED)' $OUT/gpu_test.log
