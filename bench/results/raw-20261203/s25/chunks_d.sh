#!/usr/bin/env bash
# Session 25, call D: the agent's chunk ordering, tested where it can fail.
#  1. DeliveryAgent.* (tests/gpu/test_delivery_agent.cu: a hand-driven ring on one GPU, the last chunk taken by a
#     second agent while the first copies 48 MB), main, then .carry/noorder (the wait removed: must FAIL).
#  2. Net.LargeChunked* 2x1 time-sliced (receiver now checks from the end), main then noorder.
#  3. The whole one-GPU tier (mk_gpu_tests).
# Logs to $OUT/d.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/d; mkdir -p $R
T="--gtest_filter=Net.LargeChunked* --gtest_repeat=3"
{
step_s=60 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/main_agent.log 2>&1
step_s=60 run .carry/noorder/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=5 > $R/noorder_agent.log 2>&1
step_s=80 run tools/mkrun -n 2 --timeout 75 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1 \
    build/bin/mk_dist_tests $T > $R/ts_main_large.log 2>&1
step_s=80 run tools/mkrun -n 2 --timeout 75 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1 \
    .carry/noorder/bin/mk_dist_tests $T > $R/ts_noorder_large.log 2>&1
step_s=200 run build/bin/mk_gpu_tests > $R/gpu_tier.log 2>&1
} > $R/summary.txt 2>&1
grep -h "^=== [PFS]" $R/*.log | cut -c1-160
grep -h "FAILED  \]\|landed while\|wrong bytes\|timed out" $R/*.log | sort | uniq -c | cut -c1-250 | head -20
tar czf $OUT/d.tgz -C $OUT d && rm -rf $R
