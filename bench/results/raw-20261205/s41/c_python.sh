# call C (session 41): the Python tier (torch ops, torchrun checks: dist_tp_check, dist_ring_attn_check) at
# 4b03f87: the dispatcher-mode routing (ops.traced) under real tensors. Carries build/bin build/lib.
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh python > $OUT/c/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/c/gpu_test.log
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error" $OUT/c/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
