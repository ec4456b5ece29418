#!/usr/bin/env bash
# 1 GPU: the legacy-stream warning on 2 emulated nodes sharing the GPU (probe, sync mode: legacy default stream);
# the one-rank RS/AR diagnosis with every variant checked.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
t0=$(date +%s)
PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so MK_SHARE_GPUS=1 MK_TIMEOUT_MS=5000 MK_RANKS_PER_NODE=1 \
  timeout 120 torchrun --standalone --nproc_per_node=2 tools/emu_pageable_probe.py sync > $OUT/probe.log 2>&1
echo "probe rc=$? in $(( $(date +%s) - t0 )) s"; grep -c "legacy default stream" $OUT/probe.log; grep -vE "^\s*$" $OUT/probe.log | cut -c1-260 | tail -12
t0=$(date +%s)
timeout 200 tools/mkrun -n 1 --timeout 195 build/bin/mkbench --out $OUT gemm_rs > $OUT/rs_diag.log 2>&1; echo "rs_diag rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "^\||rror|FAIL" $OUT/rs_diag.log | grep -v "^|---" | cut -c1-140
