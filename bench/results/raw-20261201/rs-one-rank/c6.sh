#!/usr/bin/env bash
# ncu PC sampling of the first W=1 gemm_rs_kernel launch (M=1024) at boost clocks; the SASS source page as CSV.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
t0=$(date +%s)
timeout 200 ncu --target-processes all --clock-control none -k regex:'gemm_rs_kernel' --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section SpeedOfLight -o $OUT/rs \
  tools/mkrun -n 1 --timeout 190 build/bin/mkbench --iters 1 --warmup 1 --out $OUT/ncu_bench gemm_rs > $OUT/ncu.log 2>&1
echo "ncu rc=$? in $(( $(date +%s) - t0 )) s"
ncu -i $OUT/rs.ncu-rep --page source --csv --print-source sass > $OUT/sass.csv 2> $OUT/sass.err; echo "export rc=$?"
head -c 600 $OUT/sass.err; wc -c $OUT/sass.csv; head -3 $OUT/sass.csv | cut -c1-400
gzip -f $OUT/sass.csv; rm -rf $OUT/ncu_bench
