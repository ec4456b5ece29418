#!/usr/bin/env bash
# 1 GPU: GemmRs tests (graph replay now also with a split tail), ranks sharing the GPU: 1x2 and 2x1 (emu).
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
s() { local n=$1; shift; timeout 200 "$@" > $OUT/$n.log 2>&1; echo "=== $n rc=$?"; grep -E "FAILED|PASSED|Graph" $OUT/$n.log | sort | uniq -c | head -8; }
s dist_1x2 tools/mkrun -n 2 --timeout 195 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='GemmRs*'
s dist_2x1 tools/mkrun -n 2 --timeout 195 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests --gtest_filter='GemmRs*'
