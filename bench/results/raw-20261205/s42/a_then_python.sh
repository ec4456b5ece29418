# call A (session 42), with the Python tier after it: a_pyab.sh with two rounds, then `tools/gpu_test.sh python`
# (this session's Python argument checks, causal / scale rules and the TP / ring overlap checks run there).
# Carries build/bin build/lib .carry/pkgs.
MK_AB_ROUNDS=2 bash bench/results/raw-20261205/s42/a_pyab.sh
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=200 tools/gpu_test.sh python > $OUT/c/gpu_test.log 2>&1
echo "gpu_test python rc=$?"
grep -h '^=== [PFS]' $OUT/c/gpu_test.log
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error" $OUT/c/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
