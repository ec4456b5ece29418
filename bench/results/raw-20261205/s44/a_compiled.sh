# call A (session 44): `tools/gpu_test.sh compiled fabric` at 1929194 (session 43's thread guard, C ABI handle
# lifetimes and bootstrap step names in every tier; none of the fabric / 2x1 / 2x2 / 1x4 tiers had run with them).
# Carries build/bin build/lib .carry/rdma build/softverbs.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 560 tools/gpu_test.sh compiled fabric > $OUT/a/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/a/gpu_test.log
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error" $OUT/a/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
