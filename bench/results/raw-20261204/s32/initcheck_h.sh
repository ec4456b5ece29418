# call H (session 32): initcheck, cuBLAS not instrumented, over the 2x1 emu tests (Net, the TP ops, GemmPeer,
# RingAttn; 2 ranks sharing the GPU), then the whole 1x2 dist tier (call G ran only the default 6 op tests).
mkdir -p $OUT/h
export SANITIZE_ARGS="--kernel-name-exclude kns=cublas,kns=nvjet"
SANITIZE_STEP_S=150 SANITIZE_DIST_FILTER='Net.*:AgGemm*:GemmRs*:GemmAr*:GemmPeer*:RingAttn*' \
  tools/sanitize_gpu.sh initcheck $OUT/h emu; echo "initcheck emu rc=$?"
SANITIZE_STEP_S=120 SANITIZE_DIST_FILTER='*:-Dist.PingPong*' tools/sanitize_gpu.sh initcheck $OUT/h dist
echo "initcheck dist rc=$?"
grep -hE '^=========     at' $OUT/h/*.log | sort | uniq -c | sort -rn | head
tar czf $OUT/h-out.tgz -C $OUT h; rm -rf $OUT/h
