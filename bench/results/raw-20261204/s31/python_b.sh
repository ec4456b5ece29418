# call B (session 31): HEAD 0fa41d8: the python part of tools/gpu_test.sh (56e855d's plan-cache warning is in it).
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh python > $OUT/b/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
