# call C (session 53): the raw-pointer checks of the standalone GEMMs, attention and ring attention (new
# tests/gpu/test_raw_pointers.cu, also under memcheck), the whole GPU tier, the Python GPU tests, ring attention on
# two ranks sharing the GPU, and torchrun dist_tp_check.py with e85cc2a's init fix. Carries build/bin build/lib.
mkdir -p $OUT/c; source tools/gpu_env.sh; source tools/gpu_steps.sh
py=$PWD/python; lib=$PWD/build/lib/libmkernel.so
{
  step_s=90 run build/bin/mk_gpu_tests
  step_s=90 run compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/mk_gpu_tests --gtest_filter='RawPointers*'
  step_s=120 run tools/mkrun -n 2 --timeout 110 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
      --gtest_filter='Ring*'
  step_s=90 run env PYTHONPATH="$py" MK_LIBRARY="$lib" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
  step_s=90 run env PYTHONPATH="$py" MK_LIBRARY="$lib" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
      torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
} > $OUT/c/c.log 2>&1
grep -h '^=== [PFS]' $OUT/c/c.log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|ERROR SUMMARY\|passed\|failed" $OUT/c/c.log | cut -c1-300 | head -30
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
