# call C (session 30): the mended test (TpPlanSignals.*) and tools/gpu_test.sh python fabric at HEAD (plans
# reusing released signal words under the Python ops, the torchrun checks, fabric). Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=60
run build/bin/mk_gpu_tests --gtest_filter='TpPlanSignals.*:TpSingleRank*' > $OUT/c/gpu_new.log 2>&1
grep -E "OK \]|FAILED|PASSED" $OUT/c/gpu_new.log | sed 's/(.*ms)//' | sort | uniq -c
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh python fabric > $OUT/c/gpu_test.log 2>&1
grep -h '^=== [PFS]' $OUT/c/gpu_test.log
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
