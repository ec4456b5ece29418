#!/usr/bin/env bash
# Session 26, call D: several delivery agent CTAs a kernel (MK_EMU_AGENTS, new), and why net_bw under MPS runs
# in a fast (~44 GB/s) or a slow (~10 GB/s) mode, a whole run at a time.
#  1. DeliveryAgent.* x5 on the tree, then .carry/noorder (tools/wip/no_chunk_order.sh: must FAIL).
#  2. The dist tier 2x1 on emu with MK_EMU_AGENTS=3: under MPS (half the SMs each), then time-sliced.
#  3. net_latency + net_bw 2x1 emu under one private MPS daemon, MK_EMU_AGENTS 1, 2, 3 alternating, 3 rounds.
#  4. .carry/smid = main's mkbench (before MK_EMU_AGENTS) with tools/wip/agent-smid.patch (-DMK_AGENT_SMID: thread
#     0 of every block of the network benchmarks' kernels prints its SM and the global timer). In slow runs,
#     does rank 0's agent share its SM with rank 1's blocks? net_bw: 6 runs under MPS at 50%, 3 under MPS
#     without the percentage, 2 time-sliced (no MPS).
# Logs to $OUT/d.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
R=$OUT/d; mkdir -p $R
T0=$(date +%s)
E="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1"
{
step_s=60 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/main_agent.log 2>&1
step_s=60 run .carry/noorder/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/noorder_agent.log 2>&1
if mps_start; then
  step_s=150 run tools/mkrun -n 2 --timeout 145 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E MK_TIMEOUT_MS=20000 \
      MK_EMU_AGENTS=3 build/bin/mk_dist_tests > $R/mps_dist_agents3.log 2>&1
  for k in 1 2 3; do
    for a in 1 2 3; do
      step_s=50 run tools/mkrun -n 2 --timeout 45 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E MK_EMU_AGENTS=$a \
          build/bin/mkbench --out $R/bench_a$a net_latency net_bw >> $R/net_a$a.log 2>&1
    done
  done
  for k in 1 2 3 4 5 6; do
    step_s=50 run tools/mkrun -n 2 --timeout 45 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E \
        .carry/smid/bin/mkbench net_bw > $R/smid_mps50_$k.log 2>&1
  done
  for k in 1 2 3; do
    step_s=50 run tools/mkrun -n 2 --timeout 45 env $E .carry/smid/bin/mkbench net_bw > $R/smid_mps100_$k.log 2>&1
  done
  mps_stop
fi
for k in 1 2; do
  step_s=60 run tools/mkrun -n 2 --timeout 55 env $E .carry/smid/bin/mkbench net_bw > $R/smid_ts_$k.log 2>&1
done
left=$((560 - ($(date +%s) - T0)))
[ $left -gt 60 ] && step_s=$left run tools/mkrun -n 2 --timeout $((left - 5)) env $E MK_TIMEOUT_MS=60000 MK_EMU_AGENTS=2 \
    build/bin/mk_dist_tests > $R/ts_dist_agents2.log 2>&1
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt
grep -h "^=== [PFS]" $R/*.log | cut -c1-200 | sort | uniq -c
grep -h "FAILED  \]\|landed while\|wrong bytes\|timed out" $R/*.log | sort | uniq -c | cut -c1-200 | head
for f in $R/net_a*.log $R/smid_*.log; do echo "--- $f $(grep -c '^smid' $f)"; grep -h "^| emu" $f | grep -v "^|---" | cut -c60-200 ; done
tar czf $OUT/d.tgz -C $OUT d && rm -rf $R
