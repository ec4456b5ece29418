#!/usr/bin/env bash
# 1 GPU (after the release.cta fix): CTA pairs (2-CTA clusters, B multicast) in the standalone GEMM: the Gemm* tests (new CtaPairsMatchCublas),
# then sustained calls (2 s each) with MK_GEMM_CTA_PAIRS=0 / 1 and cuBLAS alternating, 4 shapes, twice.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
timeout 150 build/bin/mk_gpu_tests --gtest_filter='Gemm*' > $OUT/gemm_tests.log 2>&1; echo "Gemm* tests rc=$?"
grep -E "info \]|^\[  (PASSED|FAILED) |Failure|error" $OUT/gemm_tests.log | head -30
for r in 1 2; do
 for shape in "4096 14336 8192" "4096 8192 14336" "1024 8192 14336"; do
  for v in 0 1; do echo -n "pairs=$v r$r: "; MK_GEMM_CTA_PAIRS=$v timeout 30 python3 tools/gemm_profile.py $shape mk 2; done
  echo -n "cublas r$r: "; timeout 30 python3 tools/gemm_profile.py $shape cublas 2
 done
done
