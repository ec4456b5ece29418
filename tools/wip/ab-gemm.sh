#!/usr/bin/env bash
# 1 GPU (~4 minutes): a GEMM-engine library built aside (LIB_DIR/libmkernel.so) against main's build/: correctness
# (mk_gpu_tests whole; the TP ops' tests on 2 ranks sharing the GPU), sustained speed of the standalone GEMM at
# three shapes (alternating main / LIB / cuBLAS, 2 s each, twice) and bench/tp_engine_1gpu.py with each.
# Usage (device): bash tools/wip/ab-gemm.sh LIB_DIR   (logs tarred to $OUT/ab-<LIB_DIR's name>.tgz; several in one call)
[ -f "${1:-}/libmkernel.so" ] || { echo "usage: $0 LIB_DIR (a directory holding libmkernel.so)" >&2; exit 2; }
cd "$(dirname "$0")/../.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
N=$(cd "$1" && pwd); M=$PWD/build/lib; T=ab-$(basename "$N"); R=$OUT/$T; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
LD_LIBRARY_PATH=$N timeout 120 build/bin/mk_gpu_tests > $R/gpu_tests_new.log 2>&1
echo "mk_gpu_tests (new) rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" $R/gpu_tests_new.log | head -8
timeout 230 tools/mkrun -n 2 --timeout 220 env LD_LIBRARY_PATH=$N MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
  build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*' > $R/tp_tests_new.log 2>&1
echo "AgGemm*/GemmRs*/GemmAr* 1x2 sharing the GPU (new) rc=$?"
grep -E "^\[  (PASSED|FAILED) " $R/tp_tests_new.log | head -4
for r in 1 2; do
 for shape in "4096 14336 8192" "4096 14336 1024" "4096 8192 14336"; do
  for v in main new; do
   lib=$M; [ $v = new ] && lib=$N
   echo -n "$v r$r: "; MK_LIBRARY=$lib/libmkernel.so timeout 20 python3 tools/gemm_profile.py $shape mk 2
  done
  echo -n "cublas r$r: "; timeout 20 python3 tools/gemm_profile.py $shape cublas 2
 done
done 2>&1 | tee $R/gemm_times.log
for v in main new; do
 lib=$M; [ $v = new ] && lib=$N
 MK_LIBRARY=$lib/libmkernel.so timeout 150 torchrun --standalone --nproc_per_node=1 bench/tp_engine_1gpu.py \
   --out $R/tp1_$v > $R/tp1_$v.log 2>&1; echo "tp_engine_1gpu ($v) rc=$?"; grep -E "^\|" $R/tp1_$v.log | tail -18
done
rm -rf $R/tp1_main $R/tp1_new
tar czf $OUT/$T.tgz -C $OUT $T && rm -rf $R
