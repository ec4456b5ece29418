# call D (session 35): initcheck over the whole 2x1 emu dist tier but the ping-pong (session 34's call F ran 1x2
# only; the test buffers are zeroed since session 32), cuBLAS not instrumented; then racecheck over five more of
# the attention engine's matches_sdpa shapes (session 32 ran 2 of 8; the S 2048 H 32 shape last, on its own bound).
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/d
SANITIZE_STEP_S=170 SANITIZE_DIST_FILTER='*:-Dist.PingPong*' SANITIZE_ARGS="--kernel-name-exclude kns=cublas,kns=nvjet" \
  tools/sanitize_gpu.sh initcheck $OUT/d/san emu
SANITIZE_STEP_S=150 SANITIZE_ATTN_K="matches_sdpa and (2-1000-1000-4-4-128 or 1-777-1290-8-2-128 or 1-1500-700-2-2-64 or 1-1-517-2-1-64 or 2-300-3000-6-3-128)" \
  tools/sanitize_gpu.sh racecheck $OUT/d/san attn
mv $OUT/d/san/racecheck-attn.log $OUT/d/san/racecheck-attn-five.log 2>/dev/null
SANITIZE_STEP_S=130 SANITIZE_ATTN_K="matches_sdpa and 1-2048-2048-32-8-128" tools/sanitize_gpu.sh racecheck $OUT/d/san attn
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
