# call G (session 32): initcheck over the 2x1 emu tests (Net, the TP ops, RingAttn; 2 ranks sharing the GPU), cuBLAS not instrumented.
mkdir -p $OUT/g
SANITIZE_STEP_S=220 SANITIZE_ARGS="--kernel-name-exclude kns=cublas,kns=nvjet" \
  tools/sanitize_gpu.sh initcheck $OUT/g emu; echo "initcheck emu rc=$?"
grep -hE '^=========     at' $OUT/g/*.log | sort | uniq -c | sort -rn | head
tar czf $OUT/g-out.tgz -C $OUT g; rm -rf $OUT/g
