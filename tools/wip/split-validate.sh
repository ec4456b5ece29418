#!/usr/bin/env bash
# 1 GPU (~3 minutes): what 7d0d9fb / 5c15774 changed after the last device call of 2026-12-02 (host code and
# GPU tests, never run): the whole one-GPU test binary (the standalone GEMM's split in halves on two streams and
# in a graph, the TP plans on one rank in every MK_TP_SINGLE_RANK mode), the Python GPU tests, the standalone
# GEMM at the split shape against cuBLAS (sustained), and bench/tp_engine_1gpu.py with auto (the default).
# Usage (device): bash tools/wip/split-validate.sh   (logs tarred to $OUT/split-validate.tgz)
cd "$(dirname "$0")/../.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
R=$OUT/split-validate; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 150 build/bin/mk_gpu_tests > $R/gpu_tests.log 2>&1; echo "=== mk_gpu_tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |Failure|ShortLastWave|TpSingleRank.*(OK|FAILED)" $R/gpu_tests.log | head -24
timeout 120 python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu > $R/pytest_gpu.log 2>&1
echo "=== pytest gpu rc=$?"; tail -1 $R/pytest_gpu.log
for r in 1 2; do
 for shape in "1024 14336 8192" "4096 14336 8192" "1024 8192 14336"; do
  echo -n "mk r$r $shape: "; timeout 20 python3 tools/gemm_profile.py $shape mk 2
  echo -n "cublas r$r $shape: "; timeout 20 python3 tools/gemm_profile.py $shape cublas 2
 done
done 2>&1 | tee $R/gemm_times.log
MK_TP_SINGLE_RANK=auto timeout 150 torchrun --standalone --nproc_per_node=1 bench/tp_engine_1gpu.py --out $R/tp1_auto \
  --ms 1024,2048,4096 > $R/tp1_auto.log 2>&1; echo "=== tp_engine_1gpu (auto) rc=$?"; grep -E "^\|" $R/tp1_auto.log
tar czf $OUT/split-validate.tgz -C $OUT split-validate && rm -rf $R
