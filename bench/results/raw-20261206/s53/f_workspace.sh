# call F (session 53): 8fa178e (a workspace checked only where the call uses it) and 136de43 (init's call count):
# the GPU tier (RawPointers* also under memcheck), the attention workspace tests, the Python GPU tests and
# torchrun dist_tp_check.py (its init cases). Carries build/bin build/lib.
mkdir -p $OUT/f; source tools/gpu_env.sh; source tools/gpu_steps.sh
py=$PWD/python; lib=$PWD/build/lib/libmkernel.so
{
  step_s=90 run build/bin/mk_gpu_tests
  step_s=90 run compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/mk_gpu_tests --gtest_filter='RawPointers*'
  step_s=90 run env PYTHONPATH="$py" MK_LIBRARY="$lib" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
  step_s=90 run env PYTHONPATH="$py" MK_LIBRARY="$lib" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
      torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
} > $OUT/f/f.log 2>&1
grep -h '^=== [PFS]' $OUT/f/f.log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|ERROR SUMMARY\|PASSED  \]\|passed\|failed" $OUT/f/f.log | cut -c1-300 | head -20
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
