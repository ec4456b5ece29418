#!/usr/bin/env bash
# ncu at boost clocks (--clock-control none): the W=1 GemmRs kernel vs the engine alone, with instruction counts and
# the top stall sites.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
t0=$(date +%s)
timeout 300 ncu --target-processes all --clock-control none -k regex:'gemm_rs_kernel|gemm_kernel' --launch-count 6 \
  --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  --metrics smsp__inst_executed.sum,sm__cycles_elapsed.avg.per_second,smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_wait \
  tools/mkrun -n 1 --timeout 290 build/bin/mkbench --iters 1 --warmup 1 --out $OUT/ncu_bench gemm_rs > $OUT/ncu.log 2>&1
echo "ncu rc=$? in $(( $(date +%s) - t0 )) s"
grep -E "^  [a-zA-Z_].*\(|    Duration|inst_executed.sum|per_second|Executed Instructions  |Dynamic Shared" $OUT/ncu.log | cut -c1-150 | head -60
