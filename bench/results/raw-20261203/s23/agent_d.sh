#!/usr/bin/env bash
# Session 23, call D (final tree): the step call C's bound cut (the TP checks from
# Python on 2x1 emu, ranks time-slicing the GPU), then tools/mps_test.sh once more.
# Logs to $OUT/d.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/d; mkdir -p $R
{
step_s=150 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 \
    MK_RANKS_PER_NODE=1 MK_TIMEOUT_MS=60000 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py \
    > $R/tp_check_2x1.log 2>&1
tail -2 $R/tp_check_2x1.log
MK_GPU_TEST_STEP_S=90 step_s=200 run bash tools/mps_test.sh > $R/mps.log 2>&1
grep "^===" $R/mps.log
} > $R/summary.txt 2>&1
cat $R/summary.txt
grep -h "FAILED  \]\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head
tar czf $OUT/d.tgz -C $OUT d && rm -rf $R
