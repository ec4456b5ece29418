#!/usr/bin/env bash
# 1 GPU: RS one-rank diagnosis with GemmRs's GEMM in the standalone kernel (static/dynamic/Swizzled); default lib vs
# a lib whose pipeline waits sleep up to 20 us (.carry/libhint), alternating, twice each.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
for r in 1 2; do
 for v in base hint; do
  t0=$(date +%s)
  if [ $v = hint ]; then export LD_LIBRARY_PATH=$PWD/.carry/libhint; else unset LD_LIBRARY_PATH; fi
  timeout 150 tools/mkrun -n 1 --timeout 145 build/bin/mkbench --out $OUT/$v gemm_rs > $OUT/rs_diag_${v}_$r.log 2>&1
  echo "=== $v run $r rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "^\||rror" $OUT/rs_diag_${v}_$r.log | grep -v "^|---\|^| M \|^|    M" | cut -c1-130
 done
done
