# call C (session 34): HEAD 87461ac (781efb1+0ca622f: a failed rank no longer waits for its peers at teardown): the fabric part of tools/gpu_test.sh with MK_FABRIC_STAGE=cuda (the proxy's
# CUDA copies stage GPU memory instead of the kernels' delivery agents), so e1df0ac's bounded drain runs for the
# first time. Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
export MK_FABRIC_STAGE=cuda
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh fabric > $OUT/c/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/c/gpu_test.log
grep -h 'MK_FABRIC_STAGE\|stag' $OUT/c/gpu_test.log | sort | uniq -c | head -20
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
