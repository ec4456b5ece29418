#!/usr/bin/env bash
# 1 GPU: RS one-rank diagnosis, default lib vs GemmRs without the end-of-kernel block barrier (libnosync) vs GemmRs
# without the role switch (libnoswitch); alternating, twice.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
for r in 1 2; do
 for v in base nosync noswitch; do
  if [ $v = base ]; then unset LD_LIBRARY_PATH; else export LD_LIBRARY_PATH=$PWD/.carry/lib$v; fi
  timeout 150 tools/mkrun -n 1 --timeout 145 build/bin/mkbench --out $OUT/$v gemm_rs > $OUT/rs_diag_${v}_$r.log 2>&1
  echo "=== $v run $r rc=$?"
 done
done
