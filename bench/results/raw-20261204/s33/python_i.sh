# call I (session 33): the tree of calls G-H (teardown on a failed device): the python part of tools/gpu_test.sh.
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/i
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh python > $OUT/i/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/i/gpu_test.log
tar czf $OUT/i-out.tgz -C $OUT i; rm -rf $OUT/i
