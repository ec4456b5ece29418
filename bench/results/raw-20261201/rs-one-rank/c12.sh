#!/usr/bin/env bash
# 1 GPU: RS one-rank diagnosis, default lib vs a lib whose W=1 GemmRs neither announces nor waits for entry (no system-scope store at start)
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
for r in 1 2; do
 for v in base noann; do
  t0=$(date +%s)
  if [ $v = noann ]; then export LD_LIBRARY_PATH=$PWD/.carry/libnoann; else unset LD_LIBRARY_PATH; fi
  timeout 150 tools/mkrun -n 1 --timeout 145 build/bin/mkbench --out $OUT/$v gemm_rs > $OUT/rs_diag_${v}_$r.log 2>&1
  echo "=== $v run $r rc=$? in $(( $(date +%s) - t0 )) s"
  grep -E "^\||rror" $OUT/rs_diag_${v}_$r.log | grep -v "^|---\|^| M \|^|    M" | cut -c1-130
 done
done
