# Session 60, second call (after owed.sh): compute-sanitizer memcheck over the one-rank tests that session 58/59
# changed and whose use-after-free / stale-output bugs only a memory checker shows (RingPlanLifetime: the byte
# counts read after the communicator is gone; TpPlanLifetime: plans released with their communicator), plus the
# reworked AttentionWorkspace / RawPointers / TpPlanSignals tests. Carries build/bin build/lib. ~2 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=300 run env MK_TIMEOUT_MS=600000 compute-sanitizer --tool memcheck --error-exitcode 9 \
    --target-processes application-only build/bin/mk_gpu_tests \
    --gtest_filter='RingPlanLifetime*:TpPlanLifetime*:AttentionWorkspace*:RawPointers*:TpPlanSignals*'
echo "fail=$fail"
exit $fail
