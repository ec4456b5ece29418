#!/usr/bin/env bash
# 1 GPU: where the engine's 4-5% to cuBLAS at the AG shape goes. Sustained calls (2 s each) of main's library,
# the no-epilogue experiment and the half-B experiment (tools/wip/gemm-bounds.patch; wrong results by design),
# alternating with cuBLAS, twice; then mkbench gemm (its new fixed-cost-per-tile table) with main's library.
cd "$(dirname "$0")/../.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
for r in 1 2; do
 for shape in "4096 14336 8192" "4096 8192 14336"; do
  for v in main no_epi half_b; do
   lib=$PWD/build/lib/libmkernel.so; [ $v != main ] && lib=$PWD/.carry/lib_$v/libmkernel.so
   echo -n "$v r$r: "; MK_LIBRARY=$lib timeout 30 python3 tools/gemm_profile.py $shape mk 2
  done
  echo -n "cublas r$r: "; timeout 30 python3 tools/gemm_profile.py $shape cublas 2
 done
done
timeout 150 tools/mkrun -n 1 --timeout 145 build/bin/mkbench --out $OUT gemm > $OUT/gemm.log 2>&1
echo "=== mkbench gemm rc=$?"; grep -A12 "time vs K" $OUT/gemm.log | cut -c1-160
