# call E (session 54): the tiers of a_tp.sh not run since 2092a38, with 4bfde8b's plan teardown and the later checks:
# 2x2 and 1x4 (4 ranks sharing the GPU), 2x1 emu with 2 proxy threads, torchrun dist_ring_attn_check.py.
# Carries build/bin build/lib.
mkdir -p $OUT/e
source tools/gpu_env.sh; source tools/gpu_steps.sh
{
  step_s=70 run tools/mkrun -n 4 --timeout 60 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=2 \
      build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*:Dist.Topology*:Dist.Symmetric*:Dist.Mismatched*:Net.Puts*'
  step_s=100 run tools/mkrun -n 4 --timeout 90 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=4 \
      build/bin/mk_dist_tests --gtest_filter='-Dist.PingPong*'
  step_s=50 run tools/mkrun -n 2 --timeout 45 env MK_RANKS_PER_NODE=1 MK_NET_THREADS=2 MK_SHARE_GPUS=1 \
      MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='Net.Puts*:Net.Small*:Net.Deregistering*:GemmRs*'
  step_s=60 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 \
      MK_TIMEOUT_MS=60000 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
} > $OUT/e/log 2>&1
grep -h '^=== [PFS]' $OUT/e/log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG" $OUT/e/log | cut -c1-300 | head -20
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
