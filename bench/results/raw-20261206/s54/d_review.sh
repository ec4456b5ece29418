# call D (session 54): after the review fixes (7996a6c): out's extent bound instead of ldo < 2^31, TMA stores only
# below TMA's stride limit, is_local_ipv4 on a timed-out lookup, the abort-stream report's text. The GPU tier, the
# TP / ring dist tests 1x2 sharing the GPU, the Python GPU tests, torchrun dist_tp_check.py (2 ranks).
# Carries build/bin build/lib.
mkdir -p $OUT/d
source tools/gpu_env.sh; source tools/gpu_steps.sh
lib="$PWD/build/lib/libmkernel.so"
{
  step_s=90 run build/bin/mk_gpu_tests
  step_s=70 run tools/mkrun -n 2 --timeout 60 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
      --gtest_filter='AgGemm*:GemmRs*:GemmAr*:RingAttn*'
  step_s=90 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$lib" python3 -m pytest -q -rs -p no:cacheprovider \
      tests/python/gpu
  step_s=90 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$lib" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
      torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
} > $OUT/d/log 2>&1
grep -h '^=== [PFS]' $OUT/d/log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|passed\|failed" $OUT/d/log | cut -c1-300 | head -20
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
