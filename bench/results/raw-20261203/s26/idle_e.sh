#!/usr/bin/env bash
# Session 26, call E: the secondary agents' idle pause (MK_AGENT_SECONDARY_IDLE_NS: block 0 polls the rings every
# 200 ns when idle, the other agent CTAs of a kernel every N ns). Call D: one-way 8 B latency 7.7 us with one
# agent, 8.8 with two, 11.2 with three (all polling at 200 ns). Variants (net_bench.cu built with
# tools/wip/agent_variant.sh): i200 (all alike, as in call D), i2000, i8000.
#  1. net_latency + net_bw 2x1 emu under one private MPS daemon: i2000 with MK_EMU_AGENTS=1, then each variant with
#     2 and 3 agents; 2 rounds.
#  2. The tree (build/, i2000's code): DeliveryAgent.* x3, the one-GPU tier, the dist tier 2x1 under MPS with
#     MK_EMU_AGENTS=2.
# Logs to $OUT/e.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
R=$OUT/e; mkdir -p $R
T0=$(date +%s)
E="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1"
{
if mps_start; then
  for k in 1 2; do
    for va in i2000:1 i200:2 i2000:2 i8000:2 i200:3 i2000:3 i8000:3; do
      v=${va%%:*} a=${va#*:}
      step_s=50 run tools/mkrun -n 2 --timeout 45 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E MK_EMU_AGENTS=$a \
          .carry/$v/bin/mkbench --out $R/bench_${v}_a$a net_latency net_bw >> $R/net_${v}_a$a.log 2>&1
    done
  done
  step_s=150 run tools/mkrun -n 2 --timeout 145 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E MK_TIMEOUT_MS=20000 \
      MK_EMU_AGENTS=2 build/bin/mk_dist_tests > $R/mps_dist_agents2.log 2>&1
  mps_stop
fi
step_s=60 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=3 > $R/main_agent.log 2>&1
step_s=200 run build/bin/mk_gpu_tests > $R/gpu_tier.log 2>&1
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt
grep -h "^=== [PFS]" $R/*.log | cut -c1-160 | sort | uniq -c
grep -h "FAILED  \]\|landed while\|wrong bytes\|timed out" $R/*.log | sort | uniq -c | cut -c1-200 | head
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu" $f | grep -v "^|---" | sed 's/^.*early chunks from 256 KB) //' ; done
tar czf $OUT/e.tgz -C $OUT e && rm -rf $R
