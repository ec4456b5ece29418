# call B (session 44): `tools/gpu_test.sh python` at 1929194 (c6ca3ab's RingAttention scale default, the examples'
# in-tree fallback, the Python handle lifetimes). Carries build/bin build/lib.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
timeout 570 tools/gpu_test.sh python > $OUT/b/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error\|passed\|failed" $OUT/b/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
