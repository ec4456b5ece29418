#!/usr/bin/env bash
# 1 GPU: GemmRs split tail at the walk's end (split_last): correctness (ranks sharing the GPU: 1x2, 2x1 emu, 2x2),
# the engine tests, AgGemm (work_unit changed), then the one-rank diagnosis twice (split vs no split, M to 16384).
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
s() { local n=$1; shift; timeout 200 "$@" > $OUT/$n.log 2>&1; echo "=== $n rc=$?"; grep -E "FAILED|PASSED|SKIPPED \]" $OUT/$n.log | head -8; }
s gpu_gemm build/bin/mk_gpu_tests --gtest_filter='Gemm*'
s dist_1x2 tools/mkrun -n 2 --timeout 195 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='GemmRs*:AgGemm*:GemmAr*'
s dist_2x1 tools/mkrun -n 2 --timeout 195 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests --gtest_filter='GemmRs*'
s dist_2x2 tools/mkrun -n 4 --timeout 195 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=2 build/bin/mk_dist_tests --gtest_filter='GemmRs*'
for r in 1 2; do
  timeout 250 tools/mkrun -n 1 --timeout 245 build/bin/mkbench --out $OUT/b$r gemm_rs > $OUT/rs_diag_$r.log 2>&1
  echo "=== mkbench run $r rc=$?"
  grep -E "^\| (8192|16384) \|" $OUT/rs_diag_$r.log | grep -E "cuBLAS|GemmRs \(|no split|128 CTAs|132 CTAs"
done
