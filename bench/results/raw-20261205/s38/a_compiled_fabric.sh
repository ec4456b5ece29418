# call A (session 38): HEAD (see git log below). Carries build/bin build/lib .carry/rdma build/softverbs.
# The compiled tiers (1x2, 2x1 emu, 2x2 as 4 ranks, fabric; ranks share the one GPU) with every commit of
# sessions 36-38 not yet run on a GPU: LaunchOrder's CallsOnTwoStreamsAreOrdered tests, the proxy fix a98a9cf,
# signal reuse's exchange, FdExchange, gemm_bf16's overlap refusal, fabric's event queue.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
git log --oneline -1
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled fabric > $OUT/a/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/a/gpu_test.log
grep -h "FAILED\|Failure\|timed out\|HUNG" $OUT/a/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
