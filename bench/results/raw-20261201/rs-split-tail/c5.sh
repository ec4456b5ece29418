#!/usr/bin/env bash
# 1 GPU: GemmRs tests (split tail at the walk's end, trace) across 2 emulated nodes and 2x2, ranks sharing the GPU.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
s() { local n=$1; shift; timeout 250 "$@" > $OUT/$n.log 2>&1; echo "=== $n rc=$?"; grep -E "FAILED|PASSED|OK \]" $OUT/$n.log | head -14; }
s dist_2x1 tools/mkrun -n 2 --timeout 245 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests --gtest_filter='GemmRs*'
s dist_2x2 tools/mkrun -n 4 --timeout 245 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=2 build/bin/mk_dist_tests --gtest_filter='GemmRs*'
