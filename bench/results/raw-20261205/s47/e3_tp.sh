# call E3 (session 47; E2 did not fit the budget left after more failed starts): the TP / attention host mends
# (8358d13, da1230b) and the emu link's origin, the least that covers them: the one-GPU tier, the dist tier as 2x1
# (all of it, emu) and 1x2 (TP tests) with the ranks sharing the GPU, the Python GPU tests. Carries build/bin build/lib.
mkdir -p $OUT/e
source tools/gpu_env.sh; source tools/gpu_steps.sh
sh="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
{
  step_s=40 run build/bin/mk_gpu_tests
  step_s=70 run tools/mkrun -n 2 --timeout 65 env $sh MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests
  step_s=30 run tools/mkrun -n 2 --timeout 25 env $sh build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*'
  step_s=50 run env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so python3 -m pytest -q -rs \
      -p no:cacheprovider tests/python/gpu
} > $OUT/e/e3.log 2>&1
grep -h '^=== [PFS]' $OUT/e/e3.log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|passed\|failed" $OUT/e/e3.log | cut -c1-300 | head -20
grep -h "ASmallGridFits\|AllReduceKeepsNan\|BadPlansAndInputs" $OUT/e/e3.log | sort | uniq -c | head
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
