#!/usr/bin/env bash
# Session 26, call B: the delivery agent's bulk (TMA) copies of large slots (device/net/agent.cuh), on the tree
# that also holds session 25's three commits not yet run on a GPU.
#  1. DeliveryAgent.* x5 on the tree, then on .carry/noorder (tools/wip/no_chunk_order.sh: must FAIL).
#  2. net_latency + net_bw 2x1 emu under one private MPS daemon (half the SMs each): s0 (net_bench.cu built with
#     MK_AGENT_BULK_STAGES=0: no bulk copies, the agent as before) against the tree (8 stages), alternating, 2 each.
#  3. tools/mps_test.sh (TP 1x2, the whole dist tier 2x1 on emu under MPS: the op kernels' agents, ring checks).
#  4. The one-GPU tier (mk_gpu_tests), within the time left.
# Logs to $OUT/b.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
R=$OUT/b; mkdir -p $R
T0=$(date +%s)
{
git log --oneline -1
step_s=60 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/main_agent.log 2>&1
step_s=60 run .carry/noorder/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/noorder_agent.log 2>&1
mkdir -p .carry/main/bin .carry/main/lib && cp build/bin/mkbench .carry/main/bin/ && cp build/lib/libmkernel.so .carry/main/lib/
if mps_start; then
  for v in s0 main s0 main; do
    step_s=50 run tools/mkrun -n 2 --timeout 45 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 .carry/$v/bin/mkbench --out $R/bench_$v \
        net_latency net_bw >> $R/net_$v.log 2>&1
  done
  mps_stop
fi
step_s=250 run bash tools/mps_test.sh > $R/mps_test.log 2>&1
left=$((575 - ($(date +%s) - T0)))
[ $left -gt 30 ] && step_s=$left run build/bin/mk_gpu_tests > $R/gpu_tier.log 2>&1
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
grep "^=== [PFS]\|elapsed" $R/summary.txt $R/mps_test.log | cut -c1-200
grep -h "FAILED  \]\|landed while\|wrong bytes\|timed out" $R/*.log | sort | uniq -c | cut -c1-250 | head -20
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu" $f | grep -v "^|---" | cut -c1-120 | head -30; done
tar czf $OUT/b.tgz -C $OUT b && rm -rf $R
