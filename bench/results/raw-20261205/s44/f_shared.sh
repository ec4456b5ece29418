# call F (session 44): mkbench's TP benchmarks with 2 ranks sharing one GPU (5ce7c32's correctness mode: the
# baselines on mkernel's collectives, a host barrier): the swept overlap baselines (5c9f1df, adf7262) and AG+GEMM's
# chunked pipeline run and are checked against serial for the first time. 1x2 every M (3 timed calls), then 2x1 emu
# --quick. Times are not measurements. Carries build/bin build/lib.
mkdir -p $OUT/f
source tools/gpu_env.sh
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_BENCH_OUT=$OUT/f/res
timeout --foreground 230 tools/mkrun -n 2 --timeout 220 build/bin/mkbench --iters 3 --warmup 1 ag_gemm gemm_rs gemm_ar \
  > $OUT/f/shared_1x2.log 2>&1
echo "1x2 shared rc=$?"; grep -h "check\|failed\|Error\|error\|results written\|S=" $OUT/f/shared_1x2.log | cut -c1-250 | head -20
timeout --foreground 200 tools/mkrun -n 2 --timeout 190 env MK_RANKS_PER_NODE=1 build/bin/mkbench --quick --iters 3 \
  --warmup 1 ag_gemm gemm_rs gemm_ar > $OUT/f/shared_2x1.log 2>&1
echo "2x1 shared rc=$?"; grep -h "failed\|Error\|error\|results written" $OUT/f/shared_2x1.log | cut -c1-250 | head -12
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
