#!/usr/bin/env bash
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
t0=$(date +%s)
timeout 300 ncu --target-processes all -k regex:'gemm_rs_kernel|gemm_kernel|gemm_ar_kernel' --launch-count 8 \
  --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SchedulerStats \
  tools/mkrun -n 1 --timeout 290 build/bin/mkbench --iters 1 --warmup 1 --out $OUT/ncu_bench gemm_rs > $OUT/ncu.log 2>&1
echo "ncu rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "  gemm_rs_kernel|  gemm_kernel|  gemm_ar_kernel|Duration|Dynamic Shared|Grid Size|Stall|Warp Cycles Per Issued|Issued Warp|SM Busy|Compute \(SM\) Throughput|Memory Throughput" $OUT/ncu.log | grep -v "^==PROF" | cut -c1-150 | head -150
