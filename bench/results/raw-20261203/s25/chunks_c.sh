#!/usr/bin/env bash
# Session 25, call C: as call B (chunks_b.sh), with emu's chunks published only while the agents are idle
#  1. Net.* 2x1 emu with the two ranks time-sliced on one H200 (MK_SHARE_GPUS), main's mk_dist_tests;
#     the new large-put test repeated; then the same test from .carry/noorder (tools/wip/no_chunk_order.sh:
#     the agent's wait for other agents' chunks removed), which must FAIL.
#  2. Under a private MPS daemon (both ranks resident): the same two.
#  2b. The whole dist tier 2x1 emu, time-sliced (the ops' puts chunked too).
#  3. Under MPS: mkbench net_latency net_bw, MK_EMU_CHUNK_KB=0 (one piece) against the default 256,
#     alternated, 3 rounds each.
# Logs to $OUT/c.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/c; mkdir -p $R
T="--gtest_filter=Net.LargeChunked* --gtest_repeat=4"
{
git log --oneline -1
step_s=120 run tools/mkrun -n 2 --timeout 110 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1 \
    build/bin/mk_dist_tests --gtest_filter='Net.*' > $R/ts_main_net.log 2>&1
step_s=100 run tools/mkrun -n 2 --timeout 90 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1 \
    build/bin/mk_dist_tests $T > $R/ts_main_large.log 2>&1
step_s=100 run tools/mkrun -n 2 --timeout 90 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1 \
    .carry/noorder/bin/mk_dist_tests $T > $R/ts_noorder_large.log 2>&1
step_s=235 run tools/mkrun -n 2 --timeout 230 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 \
    build/bin/mk_dist_tests > $R/ts_main_tier.log 2>&1
source tools/mps_daemon.sh
if mps_start; then
  E="env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_NET_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1"
  step_s=100 run tools/mkrun -n 2 --timeout 90 $E build/bin/mk_dist_tests --gtest_filter='Net.*' > $R/mps_main_net.log 2>&1
  step_s=100 run tools/mkrun -n 2 --timeout 90 $E build/bin/mk_dist_tests $T > $R/mps_main_large.log 2>&1
  step_s=100 run tools/mkrun -n 2 --timeout 90 $E .carry/noorder/bin/mk_dist_tests $T > $R/mps_noorder_large.log 2>&1
  for k in 0 256 0 256 0 256; do
    step_s=60 run tools/mkrun -n 2 --timeout 55 $E MK_EMU_CHUNK_KB=$k build/bin/mkbench --out $R/bench_c$k \
        net_latency net_bw >> $R/net_c$k.log 2>&1
  done
  mps_stop
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu --format=csv
} > $R/summary.txt 2>&1
cat $R/summary.txt | grep -v "^=== [^PFS]"
grep -h "^=== [PFS]" $R/*.log | cut -c1-150
grep -h "FAILED  \]\|wrong bytes\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head -20
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu" $f | grep -v "^|---" | cut -c80- | head -30; done
tar czf $OUT/c.tgz -C $OUT c && rm -rf $R
