#!/usr/bin/env bash
# 1 GPU: stmatrix TMA-store epilogue: Gemm* tests, then sustained 1 s calls, old (7974168's epilogue) vs new.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
timeout 40 build/bin/mk_gpu_tests --gtest_filter='Gemm*' > $OUT/gemm_tests.log 2>&1; echo "Gemm* tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |Failure" $OUT/gemm_tests.log | head -8
for r in 1 2; do
 for shape in "4096 14336 8192" "4096 14336 1024"; do
  for v in old new; do
   lib=$PWD/build/lib/libmkernel.so; [ $v = old ] && lib=$PWD/.carry/lib_old/libmkernel.so
   echo -n "$v r$r: "; MK_LIBRARY=$lib timeout 20 python3 tools/gemm_profile.py $shape mk 1
  done
 done
 echo -n "cublas r$r: "; timeout 20 python3 tools/gemm_profile.py 4096 14336 8192 cublas 1
done
