# call B (session 33): HEAD 61b14bf: the python part of tools/gpu_test.sh.
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh python > $OUT/b/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
