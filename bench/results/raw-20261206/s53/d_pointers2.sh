# call D (session 53): call C's attention raw-pointer test again after its fix (its lambda copied the test's
# buffers, whose copies freed them), under memcheck too; the whole GPU tier; torchrun dist_ring_attn_check.py.
# Carries build/bin build/lib.
mkdir -p $OUT/d; source tools/gpu_env.sh; source tools/gpu_steps.sh
py=$PWD/python; lib=$PWD/build/lib/libmkernel.so
{
  step_s=90 run build/bin/mk_gpu_tests
  step_s=90 run compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/mk_gpu_tests --gtest_filter='RawPointers*'
  step_s=90 run env PYTHONPATH="$py" MK_LIBRARY="$lib" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
      torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
} > $OUT/d/d.log 2>&1
grep -h '^=== [PFS]' $OUT/d/d.log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|ERROR SUMMARY\|tests ran\|PASSED  \]" $OUT/d/d.log | cut -c1-300 | head -30
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
