# call B (session 29): tools/gpu_test.sh python fabric, carrying build/bin build/lib .carry/rdma; run from the repository root
mkdir -p $OUT/b && MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh python fabric > $OUT/b/gpu_test.log 2>&1; rc=$?
grep '^=== ' $OUT/b/gpu_test.log | grep -v '^=== [a-z]' ; tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b; exit $rc
