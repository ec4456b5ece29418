#!/usr/bin/env bash
# Session 26, call A: the three commits of session 25 that had not run on a GPU (00e14d0 chunk least size,
# 24781b5 agent wait backoff, e135f37 DeliveryAgent test asserts the split).
#  1. DeliveryAgent.* x5 on main, then on .carry/noorder (built by tools/wip/no_chunk_order.sh: must FAIL).
#  2. The one-GPU tier (mk_gpu_tests).
#  3. tools/mps_test.sh (TP 1x2, the dist tier 2x1 on emu under MPS, ring checks from Python).
#  4. net_latency under MPS, MK_EMU_CHUNK_KB 0 then 256 (the chunk rule of 00e14d0).
# Logs to $OUT/a.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
R=$OUT/a; mkdir -p $R
{
git log --oneline -1
step_s=60 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/main_agent.log 2>&1
step_s=60 run .carry/noorder/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/noorder_agent.log 2>&1
step_s=200 run build/bin/mk_gpu_tests > $R/gpu_tier.log 2>&1
step_s=300 run bash tools/mps_test.sh > $R/mps_test.log 2>&1
mps_start
for kb in 0 256 0 256; do
  step_s=90 run tools/mkrun -n 2 --timeout 85 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 MK_RANKS_PER_NODE=1 \
    MK_EMU_CHUNK_KB=$kb build/bin/mkbench net_latency > $R/lat_$kb.log 2>&1
done
mps_stop
} > $R/summary.txt 2>&1
cat $R/summary.txt | grep "^=== [PFS]" | cut -c1-200
grep -h "FAILED  \]\|landed while\|wrong bytes\|timed out" $R/*.log | sort | uniq -c | cut -c1-250 | head -20
grep -h "one.way\|us " $R/lat_*.log | head -40
tar czf $OUT/a.tgz -C $OUT a && rm -rf $R
