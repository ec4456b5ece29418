# call B (session 38): the verbs transport on the GPU over softverbs (first GPU run): RC, EFA SRD, and GPU
# memory registered by DMA-BUF only (SOFTVERBS_NO_PEERMEM=1). Carries build/bin build/lib .carry/rdma build/softverbs.
mkdir -p $OUT/b
source tools/gpu_env.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh verbs > $OUT/b/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log
grep -h "FAILED\|Failure\|timed out\|HUNG\|error\|DMA-BUF\|registered by address" $OUT/b/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
