# call E (session 32): initcheck over mk_gpu_tests, cuBLAS's kernels not instrumented (call D: 2.48 million
# reports, every printed one a cuBLAS split-K reduce reading its TMA-written workspace).
mkdir -p $OUT/e
SANITIZE_STEP_S=240 SANITIZE_ARGS="--kernel-name-exclude kns=cublas,kns=nvjet" \
  tools/sanitize_gpu.sh initcheck $OUT/e gpu; echo "initcheck gpu rc=$?"
grep -E '^=========     at' $OUT/e/initcheck-gpu.log | sort | uniq -c | sort -rn | head
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
