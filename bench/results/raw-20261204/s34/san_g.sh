# call G (session 34): racecheck over the ring-attention kernel: RingAttnDist.FinishesWithTwoSmsFree, 1x2 (call F's
# 2x1 emu skipped it: the agents need SMs the test holds). Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/g
SANITIZE_STEP_S=200 SANITIZE_DIST_FILTER='RingAttn*' tools/sanitize_gpu.sh racecheck $OUT/g/san dist
SANITIZE_STEP_S=100 SANITIZE_DIST_FILTER='RingAttn*' tools/sanitize_gpu.sh synccheck $OUT/g/san dist
tar czf $OUT/g-out.tgz -C $OUT g; rm -rf $OUT/g
