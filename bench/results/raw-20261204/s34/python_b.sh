# call B (session 34): HEAD 87461ac: the python part of tools/gpu_test.sh (dist_tp_check.py with 4 ranks and on 2x1
# had not run on a tree with 781efb1 or later). Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh python > $OUT/b/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
