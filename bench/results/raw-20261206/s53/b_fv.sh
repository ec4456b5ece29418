# call B (session 53): the fabric and verbs tiers on HEAD's binaries (the bootstrap, fd-exchange and pointer-check
# changes of session 52 had not run through them). Carries build/bin build/lib .carry/rdma build/softverbs.
mkdir -p $OUT/b; source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 420 tools/gpu_test.sh fabric verbs > $OUT/b/fv.log 2>&1
echo "fabric verbs rc=$?"; grep -h '^=== [PFS]' $OUT/b/fv.log | cut -c1-160 | sed 's/LD_LIBRARY_PATH=[^ ]* //'
grep -h "FAILED\|Failure\|timed out\|HUNG" $OUT/b/fv.log | cut -c1-300 | head -20
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
