#!/usr/bin/env bash
# Session 26, call C: the agent's large slots split between the TMA (thread 0, bulk copies through 8 x 16 KB
# stages) and the other warps' copy_v16: the TMA takes the first H sixteenths of each slot of 16 KB or more.
# Variants (bench/micro/net_bench.cu built with tools/wip/agent_variant.sh): s0 = no bulk copies (the agent as
# on main), h4 / h6 / h8 = MK_AGENT_BULK_SHARE 4 / 6 / 8, h16 = everything by TMA (call B's tree).
# net_latency + net_bw 2x1 emu under one private MPS daemon (half the SMs each), alternating, 2 rounds.
# Logs to $OUT/c.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
R=$OUT/c; mkdir -p $R
T0=$(date +%s)
{
if mps_start; then
  for v in s0 h4 h6 h8 h16 h16 h8 h6 h4 s0; do
    step_s=50 run tools/mkrun -n 2 --timeout 45 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 .carry/$v/bin/mkbench --out $R/bench_$v \
        net_latency net_bw >> $R/net_$v.log 2>&1
  done
  mps_stop
fi
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt
grep -h "^=== [FS]" $R/*.log | cut -c1-200
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu" $f | grep -v "^|---" | cut -c98-200 ; done
tar czf $OUT/c.tgz -C $OUT c && rm -rf $R
