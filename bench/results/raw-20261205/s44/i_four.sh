# call I (session 44): mkbench's TP benchmarks at W = 4, four ranks sharing one GPU (the shared-GPU correctness
# mode: times are no measurements): 1x4 and 2x2 emu (gemm_rs and gemm_ar skipped 2x2 before this commit),
# --quick (M = 4096), every baseline checked against serial. Carries build/bin build/lib.
mkdir -p $OUT/i
source tools/gpu_env.sh
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_BENCH_OUT=$OUT/i/res
for rpn in 4 2; do
  timeout --foreground 170 tools/mkrun -n 4 --timeout 160 env MK_RANKS_PER_NODE=$rpn build/bin/mkbench --quick \
    --iters 3 --warmup 1 ag_gemm gemm_rs gemm_ar > $OUT/i/rpn$rpn.log 2>&1
  echo "rpn=$rpn rc=$?"; grep -h "results written\|failed\|skipped\|rror" $OUT/i/rpn$rpn.log | cut -c1-200 | head -6
done
tar czf $OUT/i-out.tgz -C $OUT i; rm -rf $OUT/i
