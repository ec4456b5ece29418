#!/usr/bin/env bash
# Session 23, call B: emu's delivery agent on one H200 (tree 5dff6ea).
# 1. tools/mps_test.sh: two ranks resident together through MPS (its 2x1 step
#    failed in most runs before the agent: bench/results/emu-work-queue-20261203.md);
# 2. 2x2 (4 ranks, 2 emulated nodes of 2, time-sliced): the two-level paths;
# 3. the dist tier 2x1 time-sliced with lazy module loading (emu no longer needs eager);
# 4. mkbench net_latency / net_bw on 2x1 emu under MPS, before (3738af7, in
#    .carry/old) and after, alternating.
# Logs to $OUT/b.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/b; mkdir -p $R
{
MK_GPU_TEST_STEP_S=100 step_s=330 run bash tools/mps_test.sh > $R/mps.log 2>&1
grep "^===" $R/mps.log
step_s=150 run tools/mkrun -n 4 --timeout 145 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=2 \
    build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*:Dist.Topology*:Dist.Symmetric*:Dist.Mismatched*:Net.Puts*' \
    > $R/dist2x2.log 2>&1
tail -1 $R/dist2x2.log
step_s=80 run tools/mkrun -n 2 --timeout 75 env CUDA_MODULE_LOADING=LAZY MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 \
    MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests > $R/dist2x1_lazy.log 2>&1
tail -1 $R/dist2x1_lazy.log
source tools/mps_daemon.sh
if mps_start; then
  for v in old new old new; do
    bin=build/bin/mkbench; [ $v = old ] && bin=.carry/old/bin/mkbench
    step_s=40 run tools/mkrun -n 2 --timeout 35 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 $bin --out $R/bench_$v \
        net_latency net_bw >> $R/net_$v.log 2>&1
  done
  mps_stop
fi
} > $R/summary.txt 2>&1
cat $R/summary.txt
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu\|one way" $f | head -20; done
grep -h "FAILED  \]\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head -20
tar czf $OUT/b.tgz -C $OUT b && rm -rf $R
