#!/usr/bin/env bash
# Session 27, call D: the resting agents, second form (the ring's busy counter: the first agent counts itself in
# it while on a batch that wants help; the others poll while it is not 0 and 20 us after). Call B's form (a wake
# per batch, then a 20 us window) let 3 agents fall asleep during the first's long copies.
#  1. DeliveryAgent.* x5.
#  2. net_latency + net_bw 2x1 emu under one private MPS daemon (50% each), MK_EMU_AGENTS 2, 3, .carry/before
#     (72d0840: every agent polls) and build/, alternated, 6 rounds; then 1 agent (build/) twice.
#  3. The dist tier 2x1 under MPS with MK_EMU_AGENTS=3, then the gpu_test.sh step (Net/TP/ring 2x1, 3 agents,
#     time-sliced), within 440 s in all.
# Logs to $OUT/d.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
R=$OUT/d; mkdir -p $R
T0=$(date +%s)
left() { echo $((440 - ($(date +%s) - T0))); }
E="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1"
{
step_s=90 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/agent_tests.log 2>&1
if mps_start; then
  for k in 1 2 3 4 5 6; do
    for a in 2 3; do
      for v in before new; do
        bin=build/bin/mkbench; [ $v = before ] && bin=.carry/before/bin/mkbench
        step_s=50 run tools/mkrun -n 2 --timeout 45 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E MK_EMU_AGENTS=$a \
            $bin --out $R/bench_${v}_a$a net_latency net_bw >> $R/net_${v}_a$a.log 2>&1
      done
    done
  done
  for k in 1 2; do
    step_s=50 run tools/mkrun -n 2 --timeout 45 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E MK_EMU_AGENTS=1 \
        build/bin/mkbench --out $R/bench_new_a1 net_latency net_bw >> $R/net_new_a1.log 2>&1
  done
  step_s=150 run tools/mkrun -n 2 --timeout 145 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E MK_TIMEOUT_MS=20000 \
      MK_EMU_AGENTS=3 build/bin/mk_dist_tests > $R/mps_dist_agents3.log 2>&1
  mps_stop
fi
[ $(left) -gt 60 ] && step_s=$(left) run tools/mkrun -n 2 --timeout $(($(left) - 5)) env MK_RANKS_PER_NODE=1 \
    MK_EMU_AGENTS=3 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='Net.*:AgGemm*:GemmRs*:GemmAr*:GemmPeer*:RingAttn*' > $R/ts_agents3.log 2>&1
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt | cut -c1-220
grep -h "FAILED  \]\|landed while\|wrong bytes\|timed out\|busy counter\|asked for help" $R/*.log | sort | uniq -c | cut -c1-200 | head
grep -h "tests ran\|PASSED  \]" $R/mps_dist_agents3.log $R/ts_agents3.log | head
tar czf $OUT/d.tgz -C $OUT d && rm -rf $R
