#!/usr/bin/env bash
# Session 26, call F: the tree with MK_EMU_AGENTS defaulting to 2 (and the secondary agents' 2 us idle pause).
#  1. net_latency + net_bw 2x1 emu under one private MPS daemon, the default (2 agents), twice.
#  2. tools/gpu_test.sh's new step: the network and op tests 2x1 with MK_EMU_AGENTS=3, time-sliced.
#  3. The torch checks across 2 emulated nodes (dist_tp_check.py, dist_ring_attn_check.py), time-sliced.
#  4. 2x2 as 4 ranks on the GPU (MK_RANKS_PER_NODE=2, time-sliced): the TP ops and some infrastructure tests.
# Logs to $OUT/f.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
R=$OUT/f; mkdir -p $R
T0=$(date +%s)
S="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
PY="PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so"
{
if mps_start; then
  for k in 1 2; do
    step_s=50 run tools/mkrun -n 2 --timeout 45 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 build/bin/mkbench --out $R/bench \
        net_latency net_bw >> $R/net_default.log 2>&1
  done
  mps_stop
fi
# Within 300 s in all (the session's device time is short): each step gets what is left, in this order.
left() { echo $((300 - ($(date +%s) - T0))); }
step_s=$(left) run tools/mkrun -n 2 --timeout $(($(left) - 5)) env MK_RANKS_PER_NODE=1 MK_EMU_AGENTS=3 $S \
    build/bin/mk_dist_tests --gtest_filter='Net.*:AgGemm*:GemmRs*:GemmAr*:GemmPeer*:RingAttn*' > $R/ts_agents3.log 2>&1
for script in tests/python/gpu/dist_tp_check.py tests/python/gpu/dist_ring_attn_check.py; do
  [ $(left) -gt 40 ] && step_s=$(left) run env $PY MK_RANKS_PER_NODE=1 $S torchrun --standalone --nproc_per_node=2 \
      $script > $R/torch_$(basename $script .py).log 2>&1
done
[ $(left) -gt 40 ] && step_s=$(left) run tools/mkrun -n 4 --timeout $(($(left) - 5)) env $S MK_RANKS_PER_NODE=2 \
    build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*:Dist.Topology*:Net.Puts*' > $R/ts_2x2.log 2>&1
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt
grep -h "^=== [PFS]" $R/*.log | cut -c1-180 | sort | uniq -c
grep -h "FAILED  \]\|wrong bytes\|timed out" $R/*.log | sort | uniq -c | cut -c1-200 | head
grep -h "^| emu" $R/net_default.log | grep -v "^|---" | cut -c60-200
tar czf $OUT/f.tgz -C $OUT f && rm -rf $R
