# call D (session 46): `tools/gpu_test.sh fabric verbs` at the session's network changes: the proxy's bound from
# the last completion, deregister_buffer's bounded drain, fabric's per-peer progress bound and FI_HMEM rules (tcp:
# no FI_HMEM, staged as before), fabric's connect message, verbs' completion-queue / QP-count / atomics checks,
# RC's GPU-ordering check (softverbs exempt), SRD's RNR-retry check, the MR dropped on a failed exchange.
# Carries build/bin build/lib .carry/rdma build/softverbs.
mkdir -p $OUT/d
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 570 tools/gpu_test.sh fabric verbs > $OUT/d/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/d/gpu_test.log | cut -c1-250
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error\|deregistering anyway" $OUT/d/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
