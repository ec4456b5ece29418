#!/usr/bin/env bash
# Session 27, call A: the resting delivery agents (the agents after a kernel's first poll no host memory until
# the first wakes them through the ring's wake counter).
#  1. DeliveryAgent.* x5 (the new RestingAgentWokenTakesTheLastChunkInOrder among them).
#  2. net_latency + net_bw 2x1 emu under one private MPS daemon (50% each), MK_EMU_AGENTS 1, 2, 3, .carry/before
#     (72d0840: every agent polls) and build/ (this tree), alternated, 4 rounds.
# Logs to $OUT/a.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
R=$OUT/a; mkdir -p $R
T0=$(date +%s)
E="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1"
{
step_s=90 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/agent_tests.log 2>&1
if mps_start; then
  for k in 1 2 3 4; do
    for a in 1 2 3; do
      for v in before new; do
        bin=build/bin/mkbench; [ $v = before ] && bin=.carry/before/bin/mkbench
        step_s=50 run tools/mkrun -n 2 --timeout 45 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E MK_EMU_AGENTS=$a \
            $bin --out $R/bench_${v}_a$a net_latency net_bw >> $R/net_${v}_a$a.log 2>&1
      done
    done
  done
  mps_stop
fi
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt
grep -h "^=== [PFS]" $R/*.log | cut -c1-200 | sort | uniq -c
grep -h "FAILED  \]\|landed while\|wrong bytes\|timed out\|woke" $R/*.log | sort | uniq -c | cut -c1-200 | head
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu" $f | grep -v "^|---" | cut -c60-200 ; done
tar czf $OUT/a.tgz -C $OUT a && rm -rf $R
