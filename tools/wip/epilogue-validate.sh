#!/usr/bin/env bash
# 1 GPU (~7-8 minutes): validate and measure tools/wip/gemm-stmatrix-epilogue.patch and tools/wip/quad-butterfly.patch.
# Needs main's build in build/ and four libraries built aside from the same tree (tools/wip/README.md):
#   .carry/lib_stm (stmatrix), .carry/lib_bfly (butterfly), .carry/lib_both (both),
#   .carry/lib_stm_stamps (stmatrix + gemm-stamps).
cd "$(dirname "$0")/../.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
C=$PWD/.carry
B=$C/lib_both
# Correctness with both patches: the GEMM tier, the TP ops on two ranks sharing the GPU, the attention tests.
LD_LIBRARY_PATH=$B timeout 120 build/bin/mk_gpu_tests > $OUT/gpu_tests_both.log 2>&1
echo "mk_gpu_tests (both) rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" $OUT/gpu_tests_both.log | head -8
timeout 230 tools/mkrun -n 2 --timeout 220 env LD_LIBRARY_PATH=$B MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
  build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*' > $OUT/tp_tests_both.log 2>&1
echo "AgGemm*/GemmRs*/GemmAr* 1x2 sharing the GPU (both) rc=$?"; grep -E "^\[  (PASSED|FAILED) " $OUT/tp_tests_both.log | head -4
MK_LIBRARY=$B/libmkernel.so timeout 200 python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_attention_gpu.py \
  > $OUT/attn_tests_both.log 2>&1; echo "pytest attention (both) rc=$?"; tail -2 $OUT/attn_tests_both.log
# Speed of the standalone GEMM: main, stmatrix, both, cuBLAS, sustained 2 s each, twice.
for r in 1 2; do
 for shape in "4096 14336 8192" "4096 14336 1024" "4096 8192 14336"; do
  for v in main stm both; do
   lib=$PWD/build/lib/libmkernel.so; [ $v != main ] && lib=$C/lib_$v/libmkernel.so
   echo -n "$v r$r: "; MK_LIBRARY=$lib timeout 20 python3 tools/gemm_profile.py $shape mk 2
  done
  echo -n "cublas r$r: "; timeout 20 python3 tools/gemm_profile.py $shape cublas 2
 done
done
for shape in "4096 14336 8192" "4096 14336 1024"; do
 MK_LIBRARY=$C/lib_stm_stamps/libmkernel.so timeout 40 python3 tools/wip/gemm_stamps.py $shape 2
done
# The TP plans at W = 1 (GEMM+RS / GEMM+AR owner stores go through the butterfly): main, then both.
for v in main both; do
 lib=$PWD/build/lib/libmkernel.so; [ $v = both ] && lib=$B/libmkernel.so
 MK_LIBRARY=$lib timeout 150 torchrun --standalone --nproc_per_node=1 bench/tp_engine_1gpu.py --out $OUT/tp1_$v \
   > $OUT/tp1_$v.log 2>&1; echo "tp_engine_1gpu ($v) rc=$?"; grep -E "^\|" $OUT/tp1_$v.log | head -30
done
# Per work unit, K loop vs what follows it (UnitMmaDone), GemmRs / GemmAr / AgGemm on one rank: main, then both.
for v in main both; do
 lp=""; [ $v = both ] && lp=$B
 LD_LIBRARY_PATH=$lp timeout 150 tools/mkrun -n 1 --timeout 145 build/bin/mkbench --quick --out $OUT/mkb_$v gemm_rs \
   > $OUT/mkb_$v.log 2>&1; echo "mkbench --quick gemm_rs, one rank ($v) rc=$?"
 grep -A12 "inside the kernel" $OUT/mkb_$v.log | cut -c1-220
done
