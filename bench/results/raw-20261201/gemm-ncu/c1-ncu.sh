#!/usr/bin/env bash
# 1 GPU: ncu of the engine vs cuBLAS at the AG and RS per-rank shapes.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
M=(4096 4096 1024)
N=(14336 8192 8192)
K=(8192 14336 14336)
met=gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,launch__grid_size,launch__cluster_dim_x,launch__cluster_dim_y,launch__block_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
for i in 0 1 2; do
 for be in mk cublas; do
  python3 tools/gemm_profile.py ${M[$i]} ${N[$i]} ${K[$i]} $be
  timeout 60 ncu --kernel-name regex:"gemm|nvjet|sm90|cutlass|xmma" --launch-skip 4 --launch-count 1 --metrics $met \
     python3 tools/gemm_profile.py ${M[$i]} ${N[$i]} ${K[$i]} $be 2>&1 | grep -v '^==PROF==' | tail -22
 done
done
# Sustained: 3 s of back-to-back calls each, SM clock and power sampled every 100 ms.
for be in mk cublas mk cublas; do
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $OUT/smi_$be.csv &
  sp=$!
  python3 tools/gemm_profile.py 4096 14336 8192 $be 3
  kill $sp; wait $sp 2>/dev/null
  echo "$be clocks (MHz, W): $(awk -F, 'NR>5{c+=$1; p+=$2; n++} END{printf "%.0f MHz %.0f W over %d samples", c/n, p/n, n}' $OUT/smi_$be.csv)"
done
