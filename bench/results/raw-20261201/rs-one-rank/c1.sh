#!/usr/bin/env bash
# 1 GPU: RS/AR one-rank diagnosis (owner-final path vs engine alone), api_block re-run after 5259639, ncu of the
# first M's fused and standalone GEMM kernels.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
t0=$(date +%s)
timeout 150 tools/mkrun -n 1 --timeout 145 build/bin/mkbench --out $OUT gemm_rs > $OUT/rs_diag.log 2>&1; echo "rs_diag rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "^\||rror" $OUT/rs_diag.log | grep -v "^|---" | cut -c1-160
t0=$(date +%s)
timeout 100 tools/mkrun -n 1 --timeout 95 build/bin/mkbench --out $OUT api_block > $OUT/api_block.log 2>&1; echo "api_block rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "^\||rror|arn" $OUT/api_block.log | cut -c1-200
t0=$(date +%s)
timeout 240 ncu --target-processes all -k regex:'gemm_rs_kernel|gemm_kernel|gemm_ar_kernel' --launch-count 12 \
  --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SchedulerStats \
  tools/mkrun -n 1 --timeout 230 build/bin/mkbench --iters 1 --warmup 0 --out $OUT/ncu_bench gemm_rs > $OUT/ncu.log 2>&1
echo "ncu rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "gemm_rs_kernel|gemm_kernel|gemm_ar_kernel|Duration|Dynamic Shared|Grid Size|Registers Per|Stall|Warp Cycles Per Issued|Issued Warp|SM Busy|Compute \(SM\) Throughput|Memory Throughput" $OUT/ncu.log | grep -v "^==PROF" | head -150
cd $OUT && tar czf logs.tgz *.log && ls
