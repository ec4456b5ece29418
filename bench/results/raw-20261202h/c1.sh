#!/usr/bin/env bash
# 1 GPU: where GemmAr's W = 1 time over GemmRs goes. Libraries (gemm_ar.cu host edits only, diagnosis):
# main; nopub = no publish_final at W = 1; one = one TMA store straight into out (no staging copy), with publish;
# onenopub = both. mkbench --quick gemm_ar (one rank: the diagnosis table) alternating, twice.
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
R=$OUT/c1; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
for r in 1 2; do
 for v in main nopub one onenopub; do
  lib=$PWD/.carry/lib_$v; t0=$(date +%s)
  timeout 100 tools/mkrun -n 1 --timeout 95 env LD_LIBRARY_PATH=$lib build/bin/mkbench --quick --out $R/b_${v}_$r gemm_ar \
    > $R/ar_${v}_$r.log 2>&1
  echo "=== $v r$r rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "^\| (1024|4096|8192) \|" $R/ar_${v}_$r.log | grep -E "cuBLAS|heuristic|alone|GEMM\+RS|swizzle 8, two|own rows"
 done
done
tar czf $OUT/c1.tgz -C $OUT c1 && rm -rf $R
