# call C (session 47): `tools/gpu_test.sh python` at the session's library changes (no Python change): every
# communicator's teardown now synchronises its device first; plans release signal words through the changed lease.
# Carries build/bin build/lib.
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
timeout 570 tools/gpu_test.sh python > $OUT/c/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/c/gpu_test.log | cut -c1-250
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error\|passed\|failed" $OUT/c/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
