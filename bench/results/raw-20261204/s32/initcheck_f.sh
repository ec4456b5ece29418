# call F (session 32): initcheck over the dist 1x2 op tests (2 ranks sharing the GPU), cuBLAS not instrumented.
mkdir -p $OUT/f
SANITIZE_STEP_S=200 SANITIZE_ARGS="--kernel-name-exclude kns=cublas,kns=nvjet" \
  tools/sanitize_gpu.sh initcheck $OUT/f dist; echo "initcheck dist rc=$?"
grep -hE '^=========     at' $OUT/f/*.log | sort | uniq -c | sort -rn | head
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
