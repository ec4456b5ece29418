# Session 60, second call (after owed.sh): tools/sanitize_gpu.sh's memcheck over the one-rank tests sessions 58-59
# changed, whose use after free / stale output only a memory checker shows (RingPlanLifetime: the byte counts read
# after the communicator is gone; TpPlanLifetime: plans released with their communicator), and the reworked
# AttentionWorkspace / RawPointers / TpPlanSignals tests (the TpSingleRankLog death test, which hung under the tool
# in session 58, left out). Logs under $OUT/san. Carries build/bin build/lib. ~2 min.
SANITIZE_GPU_FILTER='RingPlanLifetime.*:TpPlanLifetime.*:AttentionWorkspace.*:RawPointers*:TpPlanSignals.*' \
    exec tools/sanitize_gpu.sh memcheck "${OUT:-bench/results/sanitize}/san" gpu
