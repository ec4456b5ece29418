# Session 62, last call: tools/gpu_test.sh compiled on one GPU with the shared abort step now skipped (named), on
# binaries rebuilt with MK_SHARE_GPUS's new knob text. Bounded by the tool's limit; ~4-5 min.
set -u
tools/gpu_test.sh compiled > $OUT/compiled.log 2>&1; rc=$?
grep -E '^=== (PASSED|FAILED|SKIPPED)' $OUT/compiled.log | cut -c1-230
echo "gpu_test.sh compiled rc=$rc"
