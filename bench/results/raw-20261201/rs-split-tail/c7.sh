#!/usr/bin/env bash
# 1 GPU: the TP ops at W=1 against cuBLAS from Python (GPU-sleep loop), M = 4096..16384, after the RS split tail.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
export PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so"
timeout 400 torchrun --standalone --nproc_per_node=1 bench/tp_engine_1gpu.py --ms 4096,8192,16384 --out $OUT > $OUT/tp_engine.log 2>&1
echo "rc=$?"; grep -E "gemm_rs|ag_gemm" $OUT/tp_engine.log | tail -30
