#!/usr/bin/env bash
# Session 24, call E: the bimodal bandwidth under MPS (some runs copy at ~12 GB/s, others ~48, in every variant):
# fence (call B's: one fence per batch, old claim) against finalstats (the final tree + agent-stats.patch),
# alternating, 3 rounds each, `mkbench net_latency net_bw` 2x1 emu under one private MPS daemon. Logs to $OUT/e.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/e; mkdir -p $R
{
source tools/mps_daemon.sh
if mps_start; then
  for v in fence finalstats fence finalstats fence finalstats; do
    step_s=45 run tools/mkrun -n 2 --timeout 40 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 .carry/$v/bin/mkbench --out $R/bench_$v \
        net_latency net_bw >> $R/net_$v.log 2>&1
  done
  mps_stop
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu --format=csv
} > $R/summary.txt 2>&1
cat $R/summary.txt | grep -v "^=== [^PFS]"
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu" $f | grep -v "^|---" | cut -c70- | head -30; done
tar czf $OUT/e.tgz -C $OUT e && rm -rf $R
