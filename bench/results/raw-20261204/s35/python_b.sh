# call B (session 35): HEAD 3425ed5: the python part of tools/gpu_test.sh; dist_tp_check.py now checks the
# MK_PLAN_CACHE_MAX bound (bad447c, 1489f3e, f1531a0 never ran on a GPU). Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh python > $OUT/b/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
