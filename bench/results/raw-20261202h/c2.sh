#!/usr/bin/env bash
# 1 GPU: where GemmAr's W = 1 time over GemmRs goes. Libraries (gemm_ar.cu host edits only, diagnosis):
# main; nopub = no publish_final at W = 1; one = one TMA store straight into out (no staging copy), with publish;
# onenopub = both. mkbench gemm_rs at one rank (the one-rank table + timeline), alternating; stops past 480 s.
source tools/gpu_env.sh
R=$OUT/c2; mkdir -p $R; T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
for v in main onenopub nopub one main onenopub nopub one; do
  [ $(( $(date +%s) - T0 )) -gt 480 ] && break
  lib=$PWD/.carry/lib_$v; t0=$(date +%s)
  timeout 110 tools/mkrun -n 1 --timeout 105 env LD_LIBRARY_PATH=$lib build/bin/mkbench --out $R/b_$v gemm_rs \
    > $R/rs_$v.$t0.log 2>&1
  echo "=== $v rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "^\| [0-9]+ \|" $R/rs_$v.$t0.log | grep -E "cuBLAS|heuristic|swizzle [48] \||GemmAr, own" | cut -c1-120
done
tar czf $OUT/c2.tgz -C $OUT c2 && rm -rf $R
