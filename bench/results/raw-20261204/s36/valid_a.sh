# call A (session 36): HEAD 9321f19. Never ran on a GPU: 7369483/a82f32b/fc3c726 (deregister_buffer's exchanged
# outcome), dcd1a86/a82f32b (captured plans, MK_PLAN_CACHE_MAX), 426f7ad/19b7f23/f4d7600/ea684a0 (tp::PlanArgs: one
# plan-check exchange), 39e471b, 3d4a9f4, f56d3b6 (re-read refactors). The compiled tier + fabric part.
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
git log --oneline -1
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled fabric > $OUT/a/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/a/gpu_test.log
grep -h "FAILED\|Failure\|timed out" $OUT/a/gpu_test.log | cut -c1-300 | head -20
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
