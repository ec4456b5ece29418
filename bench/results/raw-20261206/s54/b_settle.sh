# call B (session 54): the plans' reported device synchronisation before their own frees (settle_before_frees):
# the new SingleRankBase.DestroyingAPlanBehindOtherWorkSaysWhatItWaitsFor, the GPU tier, the failed-teardown
# scenario, the TP and ring dist tests as 2x1 emu and 1x2 with the ranks sharing the GPU, the Python GPU tests.
# Carries build/bin build/lib.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
lib="$PWD/build/lib/libmkernel.so"
{
  step_s=60 run build/bin/mk_gpu_tests --gtest_filter='SingleRankBase.*:TpSingleRank*'
  step_s=90 run build/bin/mk_gpu_tests
  step_s=50 run tools/mkrun -n 2 --timeout 50 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
      build/bin/mk_dist_tests --failed-teardown-scenario
  step_s=130 run tools/mkrun -n 2 --timeout 120 env MK_RANKS_PER_NODE=1 MK_EMU_AGENTS=3 MK_SHARE_GPUS=1 \
      MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*:RingAttn*'
  step_s=70 run tools/mkrun -n 2 --timeout 60 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
      --gtest_filter='AgGemm*:GemmRs*:GemmAr*:GemmPeer*:RingAttn*:Dist.Symmetric*'
  step_s=90 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$lib" python3 -m pytest -q -rs -p no:cacheprovider \
      tests/python/gpu
} > $OUT/b/log 2>&1
grep -h '^=== [PFS]' $OUT/b/log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|passed\|failed" $OUT/b/log | cut -c1-300 | head -20
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
