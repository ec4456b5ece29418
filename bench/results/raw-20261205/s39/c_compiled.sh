# call C (session 39): the whole compiled tier at this session's tree (every kernel rebuilt: the knob list and
# the attention params changed; the standalone GEMM's split tiles through StreamScratch). Carries build/bin
# build/lib .carry/rdma build/softverbs.
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled > $OUT/c/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/c/gpu_test.log
grep -h "FAILED\|Failure\|timed out\|HUNG" $OUT/c/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
