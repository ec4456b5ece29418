#!/usr/bin/env bash
# Session 24, call F: the agent's two batch fences as fence.acq_rel.sys (MEMBAR.ALL.SYS, what st.release.sys
# issues) instead of __threadfence_system() (fence.sc.sys, MEMBAR.SC.SYS): finalstats (c17bc84 + agent-stats.patch)
# against acqrel (the same with acq_rel fences), alternating, 2 rounds each, under one private MPS daemon; then the
# whole dist tier 2x1 on emu, time-sliced, with the acq_rel build. Logs to $OUT/f.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/f; mkdir -p $R
{
source tools/mps_daemon.sh
if mps_start; then
  for v in finalstats acqrel finalstats acqrel; do
    step_s=45 run tools/mkrun -n 2 --timeout 40 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 .carry/$v/bin/mkbench --out $R/bench_$v \
        net_latency net_bw >> $R/net_$v.log 2>&1
  done
  mps_stop
fi
step_s=170 run tools/mkrun -n 2 --timeout 165 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_NET_TIMEOUT_MS=20000 \
    MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests > $R/dist2x1.log 2>&1
tail -1 $R/dist2x1.log
} > $R/summary.txt 2>&1
cat $R/summary.txt | grep -v "^=== [^PFS]"
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu" $f | grep -v "^|---" | cut -c70- | head -30; done
grep -h "FAILED  \]\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head -20
tar czf $OUT/f.tgz -C $OUT f && rm -rf $R
