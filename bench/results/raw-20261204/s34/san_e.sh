# call E (session 34): synccheck over the whole dist tier (but the 100k ping-pong), 1x2 and 2x1 emu, ranks sharing
# the GPU; then racecheck over the 6 default op tests (AgGemm, GemmRs, GemmAr across shapes and the 3 standalone
# collectives), 1x2. Neither ran before. Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/e
SANITIZE_STEP_S=120 SANITIZE_DIST_FILTER='*:-Dist.PingPong*' tools/sanitize_gpu.sh synccheck $OUT/e/san dist emu
SANITIZE_STEP_S=230 tools/sanitize_gpu.sh racecheck $OUT/e/san dist
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
