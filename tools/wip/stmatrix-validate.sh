#!/usr/bin/env bash
# 1 GPU: validate and measure tools/wip/gemm-stmatrix-epilogue.patch. Libraries built at cbe6286:
# .carry/lib_stm (the patch), .carry/lib_stm_stamps (the patch + tools/wip/gemm-stamps.patch); main's in build/lib.
cd "$(dirname "$0")/../.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
S=$PWD/.carry/lib_stm
LD_LIBRARY_PATH=$S timeout 60 build/bin/mk_gpu_tests --gtest_filter='Gemm*' > $OUT/gemm_tests.log 2>&1
echo "Gemm* (stmatrix lib) rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" $OUT/gemm_tests.log | head -8
timeout 200 tools/mkrun -n 2 --timeout 190 env LD_LIBRARY_PATH=$S MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
  build/bin/mk_dist_tests --gtest_filter='AgGemm*' > $OUT/ag_tests.log 2>&1
echo "AgGemm* 1x2 sharing the GPU (stmatrix lib) rc=$?"; grep -E "^\[  (PASSED|FAILED) " $OUT/ag_tests.log | head -4
for r in 1 2; do
 for shape in "4096 14336 8192" "4096 14336 1024" "4096 8192 14336"; do
  for v in main stm; do
   lib=$PWD/build/lib/libmkernel.so; [ $v = stm ] && lib=$S/libmkernel.so
   echo -n "$v r$r: "; MK_LIBRARY=$lib timeout 20 python3 tools/gemm_profile.py $shape mk 2
  done
  echo -n "cublas r$r: "; timeout 20 python3 tools/gemm_profile.py $shape cublas 2
 done
done
for shape in "4096 14336 8192" "4096 14336 1024"; do
 MK_LIBRARY=$PWD/.carry/lib_stm_stamps/libmkernel.so timeout 40 python3 tools/wip/gemm_stamps.py $shape 2
done
