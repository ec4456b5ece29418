#!/usr/bin/env bash
# 1 GPU: the per-warp TMA-store boxes + tile arithmetic under the last MMAs (lib_new) against main (lib_main, 0cfad93):
# correctness (GEMM tier, TP ops on 2 ranks sharing the GPU), sustained speed, the W = 1 plans; then an ncu
# profile with warp samples per SASS line of the attention engine at S = 16k (for the next change there).
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
C=$PWD/.carry; N=$C/lib_new; M=$C/lib_main; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
LD_LIBRARY_PATH=$N timeout 120 build/bin/mk_gpu_tests > $R/gpu_tests_new.log 2>&1
echo "mk_gpu_tests (new) rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" $R/gpu_tests_new.log | head -8
timeout 230 tools/mkrun -n 2 --timeout 220 env LD_LIBRARY_PATH=$N MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
  build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*' > $R/tp_tests_new.log 2>&1
echo "AgGemm*/GemmRs*/GemmAr* 1x2 sharing the GPU (new) rc=$?"; grep -E "^\[  (PASSED|FAILED) " $R/tp_tests_new.log | head -4
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
 MK_LIBRARY=$lib/libmkernel.so timeout 150 torchrun --standalone --nproc_per_node=1 bench/tp_engine_1gpu.py --out $R/tp1_$v \
   > $R/tp1_$v.log 2>&1; echo "tp_engine_1gpu ($v) rc=$?"; grep -E "^\|" $R/tp1_$v.log | tail -18
done
timeout 150 ncu --clock-control none -k regex:'attention_kernel' --launch-skip 2 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section SpeedOfLight -o $OUT/attn \
  python3 tools/attn_profile.py 1 16384 32 32 128 0 > $R/ncu_attn.log 2>&1; echo "ncu attention rc=$?"
ncu -i $OUT/attn.ncu-rep --page source --csv --print-source sass > $R/sass_attn.csv 2>/dev/null; echo "export rc=$?"
ncu -i $OUT/attn.ncu-rep --page details > $R/details_attn.txt 2>&1
grep -E "Duration|SM Frequency|Warp Cycles Per Issued|Issue Slots Busy" $R/details_attn.txt | head -6
rm -f $OUT/*.ncu-rep; rm -rf $R/tp1_main $R/tp1_new
tar czf $OUT/c22.tgz -C $OUT r && rm -rf $R; ls -la $OUT
