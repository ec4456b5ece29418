# call A (session 29): tools/gpu_test.sh compiled, carrying build/bin build/lib .carry/rdma; run from the repository root
mkdir -p $OUT/a && MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled > $OUT/a/gpu_test.log 2>&1; rc=$?
grep '^=== ' $OUT/a/gpu_test.log | grep -v '^=== [a-z]' ; tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a; exit $rc
