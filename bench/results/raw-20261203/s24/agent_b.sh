#!/usr/bin/env bash
# Session 24, call B: where emu's delivery agent spends its time. Under one private MPS daemon (both ranks
# resident, half the SMs each), alternating: base = 4206fe1's mkbench; stats = the same with
# tools/wip/agent-stats.patch (each agent prints its time per phase when it ends); fence = stats plus one
# system-scope fence per batch for the signals and one for the done words (was one per signal and per done word);
# poll1 = fence plus an idle agent reading one stamp per round (was 8 lanes reading 8).
# `mkbench net_latency net_bw` 2x1 emu. Logs to $OUT/b.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/b; mkdir -p $R
{
source tools/mps_daemon.sh
if mps_start; then
  for v in base stats fence poll1 base stats fence poll1; do
    step_s=45 run tools/mkrun -n 2 --timeout 40 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 .carry/$v/bin/mkbench --out $R/bench_$v \
        net_latency net_bw >> $R/net_$v.log 2>&1
  done
  mps_stop
fi
} > $R/summary.txt 2>&1
cat $R/summary.txt | grep -v "^=== [^PFS]"
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu\|one way" $f | grep -v "^|---" | head -20; done
grep -h "FAILED  \]\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head -20
tar czf $OUT/b.tgz -C $OUT b && rm -rf $R
