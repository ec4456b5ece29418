#!/usr/bin/env bash
# 1 GPU: the storer sleeps in its waits (kStorerSuspendNs); RS/AR one-rank diagnosis with engine wait hints; twice.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
for r in 1 2; do
t0=$(date +%s)
timeout 150 tools/mkrun -n 1 --timeout 145 build/bin/mkbench --out $OUT gemm_rs > $OUT/rs_diag$r.log 2>&1; echo "rs_diag rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "^\||rror" $OUT/rs_diag$r.log | grep -v "^|---\|^| M " | cut -c1-160
done
t0=$(date +%s)
timeout 200 ncu --target-processes all --clock-control none -k regex:'gemm_rs_kernel|gemm_kernel' --launch-count 3 \
  --metrics smsp__inst_executed.sum,sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,smsp__inst_executed_op_branch.sum \
  tools/mkrun -n 1 --timeout 190 build/bin/mkbench --iters 1 --warmup 1 --out $OUT/ncu_bench gemm_rs > $OUT/ncu.log 2>&1
echo "ncu rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "^  [a-zA-Z_].*\(|inst_executed|per_second|duration" $OUT/ncu.log | cut -c1-150 | head -30
