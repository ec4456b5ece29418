#!/usr/bin/env bash
# 1 GPU: the one-rank diagnosis + timeline (RS/AR and AG shapes, SMs busy), twice.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
for r in 1 2; do
  timeout 250 tools/mkrun -n 1 --timeout 245 build/bin/mkbench --out $OUT/b$r gemm_rs > $OUT/rs_timeline_$r.log 2>&1
  echo "=== mkbench run $r rc=$?"
  grep -A16 "inside the kernel" $OUT/rs_timeline_$r.log | cut -d'|' -f2-4,6-13
done
