#!/usr/bin/env bash
# 1 GPU: the one-rank diagnosis + timeline (warm traced calls, host us per call), twice; ring trace (TraceLog refactor)
# as 2 ranks sharing the GPU.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
for r in 1 2; do
  timeout 200 tools/mkrun -n 1 --timeout 195 build/bin/mkbench --out $OUT/b$r gemm_rs > $OUT/rs_timeline_$r.log 2>&1
  echo "=== mkbench run $r rc=$?"
  grep -A12 "inside the kernel" $OUT/rs_timeline_$r.log
done
timeout 150 env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
  torchrun --standalone --nproc_per_node=2 tools/ring_trace.py --events 256 > $OUT/ring_trace.log 2>&1; echo "=== ring_trace rc=$?"; head -30 $OUT/ring_trace.log
