#!/usr/bin/env bash
# 1 GPU: TMA-store epilogue in swizzled 64-column boxes, two buffers (new, build/lib) vs a2b6a7d (.carry/libbase):
# sustained Python calls at the AG shape, mkbench gemm --quick alternating; then the GEMM / AG tests.
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
new=$PWD/build/lib/libmkernel.so; base=$PWD/.carry/libbase/libmkernel.so
for r in 1 2; do
 for m in 4096 1024; do
  for v in new base; do
   lib=$new; [ $v = base ] && lib=$base
   echo -n "$v r$r: "; MK_LIBRARY=$lib timeout 30 python3 tools/gemm_profile.py $m 14336 8192 mk 2
  done
  echo -n "cublas r$r: "; timeout 30 python3 tools/gemm_profile.py $m 14336 8192 cublas 2
 done
done
for v in new base; do
  if [ $v = base ]; then export LD_LIBRARY_PATH=$PWD/.carry/libbase; else unset LD_LIBRARY_PATH; fi
  timeout 60 tools/mkrun -n 1 --timeout 55 build/bin/mkbench --quick --out $OUT/$v gemm > $OUT/gemm_$v.log 2>&1
  echo "=== mkbench $v rc=$?"; grep -E "^\| (square|AG|GEMM)" $OUT/gemm_$v.log | cut -c1-200
done
unset LD_LIBRARY_PATH
timeout 60 build/bin/mk_gpu_tests --gtest_filter='Gemm*' 2>&1 | tail -4
timeout 100 tools/mkrun -n 2 --timeout 95 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='AgGemm*' 2>&1 | grep -E "PASSED|FAILED|tests ran" | head
