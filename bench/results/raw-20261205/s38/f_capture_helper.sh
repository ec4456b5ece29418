# call F (session 38): one shared stream_capturing() for LaunchOrder and the plans' capture note (a re-read's
# refactor): the one-GPU plan tests (refused calls, captures) and the 1x2 two-stream, graph and captured tests.
mkdir -p $OUT/f
source tools/gpu_env.sh; source tools/gpu_steps.sh; out=$OUT
logged 90 f/gpu.log build/bin/mk_gpu_tests --gtest_filter='TpSingleRank*:Gemm.*'
logged 200 f/dist-1x2.log tools/mkrun -n 2 --timeout 190 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='*CallsOnTwoStreams*:*CudaGraph*:*Captured*:*captured*'
grep -h "PASSED\|FAILED" $OUT/f/*.log
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
