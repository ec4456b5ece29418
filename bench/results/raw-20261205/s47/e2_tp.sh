# call E2 (session 47; E, the whole compiled part, did not fit the budget left after two failed starts): the TP /
# attention host mends (8358d13, da1230b) and the emu link's origin on one GPU, ranks sharing it: the one-GPU tier,
# the dist tier as 1x2 (TP tests), 2x1 (all of it, emu), 2x2 (TP tests), then the Python GPU tests and the 2-rank
# torchrun TP and ring checks. Carries build/bin build/lib.
mkdir -p $OUT/e
source tools/gpu_env.sh; source tools/gpu_steps.sh
sh="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
py="env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so"
{
  step_s=60 run build/bin/mk_gpu_tests
  step_s=60 run tools/mkrun -n 2 --timeout 55 env $sh build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*'
  step_s=90 run tools/mkrun -n 2 --timeout 85 env $sh MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests
  step_s=60 run tools/mkrun -n 4 --timeout 55 env $sh MK_RANKS_PER_NODE=2 build/bin/mk_dist_tests \
      --gtest_filter='AgGemm*:GemmRs*:GemmAr*'
  step_s=60 run $py python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
  step_s=70 run $py $sh torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
  step_s=70 run $py $sh torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
} > $OUT/e/e2.log 2>&1
grep -h '^=== [PFS]' $OUT/e/e2.log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|passed\|failed" $OUT/e/e2.log | cut -c1-300 | head -20
grep -h "ASmallGridFits\|AllReduceKeepsNan\|SignalsReleasedWhile" $OUT/e/e2.log | sort | uniq -c | head
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
