#!/usr/bin/env bash
# Session 27, call F: do the resting agents change the ops on emu? Before them the agents after a kernel's first
# polled the host rings all through the op (host reads, which slow the GPU's system-scope fences:
# net-post-20261201.md). mkbench ag_gemm gemm_rs gemm_ar --quick (M = 4096) as 2 emulated nodes, 2 ranks under
# one private MPS daemon (50% each), MK_EMU_AGENTS=2 (default), .carry/before (72d0840) and build/ alternated,
# rounds while time is left (within 380 s). Logs to $OUT/f.tgz.
# RAN AND FAILED AT ONCE: the benchmarks' NCCL baselines cannot make a communicator of two ranks on one GPU
# (ncclCommInitRank: invalid usage), so the ops cannot be timed this way on one GPU (ops_f-out.tgz).
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
R=$OUT/f; mkdir -p $R
T0=$(date +%s)
left() { echo $((380 - ($(date +%s) - T0))); }
E="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_NET_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1"
{
if mps_start; then
  for k in 1 2 3 4; do
    for v in before new; do
      [ $(left) -gt 70 ] || break 2
      bin=build/bin/mkbench; [ $v = before ] && bin=.carry/before/bin/mkbench
      step_s=65 run tools/mkrun -n 2 --timeout 60 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E \
          $bin --quick --out $R/bench_$v ag_gemm gemm_rs gemm_ar >> $R/ops_$v.log 2>&1
    done
  done
  mps_stop
fi
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt | cut -c1-160
for v in before new; do echo "--- $v"; grep -h "^| 4096\|^| M \|^## " $R/ops_$v.log | cut -c1-170 | head -60; done
tar czf $OUT/f.tgz -C $OUT f && rm -rf $R
