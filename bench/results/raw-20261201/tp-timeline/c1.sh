#!/usr/bin/env bash
# 1 GPU: GEMM engine trace (KernelEntry/CtaStart/UnitBegin/CtaEnd/KernelExit) -- the one-rank diagnosis + timeline,
# GemmRs trace test at W=2 (ranks share the GPU), GEMM engine tests, ring trace refactor check.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
timeout 200 tools/mkrun -n 1 --timeout 195 build/bin/mkbench --out $OUT/b gemm_rs > $OUT/rs_timeline.log 2>&1; echo "=== mkbench rc=$?"
tail -40 $OUT/rs_timeline.log
timeout 150 tools/mkrun -n 2 --timeout 145 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
  --gtest_filter='GemmRs*' > $OUT/dist_rs.log 2>&1; echo "=== dist GemmRs rc=$?"; tail -5 $OUT/dist_rs.log
timeout 120 build/bin/mk_gpu_tests --gtest_filter='Gemm*' > $OUT/gpu_gemm.log 2>&1; echo "=== gpu Gemm rc=$?"; tail -3 $OUT/gpu_gemm.log
timeout 100 env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
  torchrun --standalone --nproc_per_node=2 tools/ring_trace.py --events 256 > $OUT/ring_trace.log 2>&1; echo "=== ring_trace rc=$?"; tail -12 $OUT/ring_trace.log
