# call F (session 34): racecheck over the ring-attention dist tests and the 6 default op tests as 2x1 emu (delivery
# agents in the kernels), ranks sharing the GPU; then initcheck over the whole 1x2 dist tier with cuBLAS not
# instrumented (session 32's call H reached its bound printing reports of a test buffer since zeroed).
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/f
F='RingAttn*:AgGemmTest.MatchesReferenceAcrossShapes:AgGemmTest.StandaloneAllGather:GemmRsTest.MatchesReferenceAcrossShapes'
F+=':GemmRsTest.StandaloneReduceScatter:GemmArTest.MatchesReferenceAcrossShapes:GemmArTest.StandaloneAllReduce'
SANITIZE_STEP_S=240 SANITIZE_DIST_FILTER="$F" tools/sanitize_gpu.sh racecheck $OUT/f/san emu
SANITIZE_STEP_S=200 SANITIZE_DIST_FILTER='*:-Dist.PingPong*' SANITIZE_ARGS="--kernel-name-exclude kns=cublas,kns=nvjet" \
  tools/sanitize_gpu.sh initcheck $OUT/f/san dist
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
