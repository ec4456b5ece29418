#!/usr/bin/env bash
# 1 GPU: GemmAr at W = 1, deferred publish variants: main, new (deferred, with the leaders' system fence),
# fin1 (deferred, no leader system fence: the signal's release alone), fin2 (deferred publish skipped: diagnosis).
# mkbench gemm_rs one rank, alternating; stops past 430 s.
source tools/gpu_env.sh
R=$OUT/c4; mkdir -p $R; T0=$(date +%s)
for v in main new fin1 fin2 main new fin1 fin2; do
  [ $(( $(date +%s) - T0 )) -gt 430 ] && break
  lib=$PWD/.carry/lib_$v; t0=$(date +%s)
  timeout 100 tools/mkrun -n 1 --timeout 95 env LD_LIBRARY_PATH=$lib build/bin/mkbench --out $R/b_$v gemm_rs \
    > $R/rs_$v.$t0.log 2>&1
  echo "=== $v rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "^\| +[0-9]+ \|" $R/rs_$v.$t0.log | grep -E " cuBLAS | GemmRs \(heur| GemmAr \(heur" | sed 's/  */ /g' | \
    awk -F'|' '{printf "%s:%s ", $2, $4} END {print ""}'
done
tar czf $OUT/c4.tgz -C $OUT c4 && rm -rf $R
