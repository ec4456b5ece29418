# call C (session 54): a review's input checks: the GEMM's workspace apart from a, b and out, the grouped GEMM's
# out and workspace apart from its operands and its group bound, ldo below 2^31, attention's tensor bytes below 2^48
# (new Gemm.AWorkspaceOverlappingItsOperandsIsRefused; Gemm.RejectsBadInputBeforeLaunching's ldo case); then the GPU
# tier, the TP dist tests 1x2 sharing the GPU (their fused GEMMs take make_params), the Python GPU tests.
# Carries build/bin build/lib.
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
{
  step_s=60 run build/bin/mk_gpu_tests --gtest_filter='Gemm.*:RawPointers*:Attention*'
  step_s=90 run build/bin/mk_gpu_tests
  step_s=70 run tools/mkrun -n 2 --timeout 60 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
      --gtest_filter='AgGemm*:GemmRs*:GemmAr*:RingAttn*'
  step_s=90 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" python3 -m pytest -q -rs \
      -p no:cacheprovider tests/python/gpu
} > $OUT/c/log 2>&1
grep -h '^=== [PFS]' $OUT/c/log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|passed\|failed" $OUT/c/log | cut -c1-300 | head -20
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
