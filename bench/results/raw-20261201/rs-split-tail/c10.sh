#!/usr/bin/env bash
# 1 GPU: the one-rank diagnosis at HEAD (after the split tail's wave condition), once.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
timeout 250 tools/mkrun -n 1 --timeout 245 build/bin/mkbench --out $OUT/b gemm_rs > $OUT/rs_diag_3.log 2>&1
echo "=== mkbench rc=$?"
grep -E "^\| +(1024|8192|16384) \|" $OUT/rs_diag_3.log | grep -E "cuBLAS|GemmRs \(|no split"
