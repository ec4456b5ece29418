# call D (session 36): HEAD d44aab3's library (teardown_call): the python part of tools/gpu_test.sh.
mkdir -p $OUT/d
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=200 tools/gpu_test.sh python > $OUT/d/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/d/gpu_test.log
grep -h "not released\|FAILED" $OUT/d/gpu_test.log | cut -c1-300 | head -10
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
