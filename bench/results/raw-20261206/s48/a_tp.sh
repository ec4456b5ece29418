# call A (session 48; session 47's call E, which never ran): the TP / attention host mends (8358d13: each plan
# call checks the current device; AgGemm's
# default comm CTAs fitted to the grid, new AgGemmTest.ASmallGridFitsTheDefaultCommCtas; its own gathered buffer
# refused as an argument; GemmRs / GemmAr's default Reduce CTAs fitted; attention's workspace apart from its
# tensors; ring attention's comm-CTA message) and the test mains' driver check (232e336):
# `tools/gpu_test.sh compiled`, then the Python GPU tests and the 2-rank torchrun checks sharing the GPU.
# Carries build/bin build/lib.
# MK_PY_DIR: the Python package to test (default ./python; a snapshot of HEAD's when the tree has edits in flight).
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 330 tools/gpu_test.sh compiled > $OUT/a/compiled.log 2>&1
echo "compiled rc=$?"
grep -h '^=== [PFS]' $OUT/a/compiled.log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG" $OUT/a/compiled.log | cut -c1-300 | head -20
{
  py=${MK_PY_DIR:-$PWD/python}
  step_s=90 run env PYTHONPATH="$py" MK_LIBRARY="$PWD/build/lib/libmkernel.so" python3 -m pytest -q -rs \
      -p no:cacheprovider tests/python/gpu
  for script in tests/python/gpu/dist_tp_check.py tests/python/gpu/dist_ring_attn_check.py; do
    step_s=90 run env PYTHONPATH="$py" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=60000 torchrun --standalone --nproc_per_node=2 "$script"
  done
} > $OUT/a/python.log 2>&1
grep -h '^=== [PFS]' $OUT/a/python.log | cut -c1-200
grep -h "passed\|failed\|Error" $OUT/a/python.log | cut -c1-300 | head -10
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
