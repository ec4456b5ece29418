#!/usr/bin/env bash
# Session 23, call B: emu's delivery agent under MPS on one H200 (two ranks
# resident together, half the SMs each): tools/mps_test.sh (its 2x1 step
# failed in most runs before the agent: bench/results/emu-work-queue-
# 20261203.md), then mkbench net_latency / net_bw on 2x1 emu under MPS,
# before (3738af7, in .carry/old) and after, alternating twice; then the dist
# tier 2x1 time-sliced once more (the trace fix), with lazy module loading
# (emu no longer needs eager loading). Logs to $OUT/b.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/b; mkdir -p $R
{
MK_GPU_TEST_STEP_S=100 step_s=330 run bash tools/mps_test.sh > $R/mps.log 2>&1
grep "^===" $R/mps.log
source tools/mps_daemon.sh
if mps_start; then
  for round in 1 2; do
    for v in old new; do
      bin=build/bin/mkbench; [ $v = old ] && bin=.carry/old/bin/mkbench
      step_s=45 run tools/mkrun -n 2 --timeout 40 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
          MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 $bin --out $R/bench_${v}_$round \
          net_latency net_bw > $R/net_${v}_$round.log 2>&1
    done
  done
  mps_stop
fi
step_s=80 run tools/mkrun -n 2 --timeout 75 env CUDA_MODULE_LOADING=LAZY MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 \
    MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests > $R/dist2x1.log 2>&1
tail -1 $R/dist2x1.log
} > $R/summary.txt 2>&1
cat $R/summary.txt
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu\|one way" $f | head -12; done
grep -h "FAILED  \]\|stuck\|timed out" $R/*.log | sort | uniq -c | head -20
tar czf $OUT/b.tgz -C $OUT b && rm -rf $R
