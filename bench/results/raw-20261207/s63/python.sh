# Session 63: tools/gpu_test.sh python whole on one GPU (pytest gpu, the torchrun checks with 2 and 4 ranks sharing
# the GPU, the 2x1 emu layouts and the examples), on binaries at HEAD. Bounded by the tool's limit; ~5 min.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
tools/gpu_test.sh python > $OUT/python.log 2>&1; rc=$?
grep -E '^=== (PASSED|FAILED|SKIPPED)' $OUT/python.log | cut -c1-230
tail -5 $OUT/python.log | cut -c1-230
echo "gpu_test.sh python rc=$rc"
