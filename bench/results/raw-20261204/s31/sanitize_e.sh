# call E (session 31): memcheck over the whole dist tier on 2 ranks sharing the GPU (1x2, but the 100k-round
# ping-pong), then over 2 emulated nodes (network, TP and ring tests); racecheck and synccheck over mk_gpu_tests.
# Carries build/bin build/lib.
mkdir -p $OUT/e
export SANITIZE_STEP_S=125
SANITIZE_DIST_FILTER='*:-Dist.PingPong*' tools/sanitize_gpu.sh memcheck $OUT/e dist; echo "rc=$?"
export SANITIZE_STEP_S=125
SANITIZE_DIST_FILTER='Net.*:AgGemm*:GemmRs*:GemmAr*:GemmPeer*:RingAttn*' tools/sanitize_gpu.sh memcheck $OUT/e emu; echo "rc=$?"
tools/sanitize_gpu.sh racecheck $OUT/e gpu; echo "rc=$?"
tools/sanitize_gpu.sh synccheck $OUT/e gpu; echo "rc=$?"
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
