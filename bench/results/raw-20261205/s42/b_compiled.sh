# call B (session 42): `tools/gpu_test.sh compiled fabric` at this session's tree (bootstrap's close and
# rejection messages, fabric connect's outcome exchange, the proxy error in Communicator::check; every tier
# bootstraps and connects through them). Carries build/bin build/lib .carry/rdma build/softverbs.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled fabric > $OUT/b/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error" $OUT/b/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
