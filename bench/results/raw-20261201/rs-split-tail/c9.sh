#!/usr/bin/env bash
# 1 GPU: GemmRs tests after the split guard (other shares fill a wave), ranks sharing the GPU: 1x2, 2x1 (emu), 2x2;
# then the one-rank diagnosis once (the plan at W=1 unchanged: split at M=8192/16384).
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
s() { local n=$1; shift; timeout 150 "$@" > $OUT/$n.log 2>&1; echo "=== $n rc=$?"; grep -E "FAILED|PASSED|Split|Graph|Trace" $OUT/$n.log | grep -v RUN | sort | uniq -c | head -8; }
s dist_1x2 tools/mkrun -n 2 --timeout 145 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='GemmRs*'
s dist_2x1 tools/mkrun -n 2 --timeout 145 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests --gtest_filter='GemmRs*'
s dist_2x2 tools/mkrun -n 4 --timeout 145 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=2 build/bin/mk_dist_tests --gtest_filter='GemmRs*'
