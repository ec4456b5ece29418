# call H (session 45): the TP tables' new last column (best baseline / mkernel round by round) on a GPU, two ranks
# sharing it as 1x2 (--quick, 5 timed rounds: a correctness run; the times are no measurements). Carries
# build/bin build/lib.
mkdir -p $OUT/h
source tools/gpu_env.sh
MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_BENCH_OUT=$OUT/h/res timeout --foreground 100 tools/mkrun -n 2 --timeout 90 \
  build/bin/mkbench --quick --iters 5 --warmup 1 ag_gemm gemm_rs gemm_ar > $OUT/h/shared.log 2>&1
echo "1x2 shared rc=$?"; grep -h "^| 4096" $OUT/h/shared.log | awk -F'|' '{print $(NF-2)}'
tar czf $OUT/h-out.tgz -C $OUT h; rm -rf $OUT/h
