# call C (session 45): does the Python benches' GPU spin before each call explain the ~10% gap between mkbench's
# and torch_tp_bench.py's times (2026-12-01)? One GPU, one rank: mkbench gemm (engine vs cuBLAS, every shape) and
# gemm_rs --quick (the one-rank diagnosis: GemmRs / GemmAr vs cuBLAS at M = 1024..16384), back to back (lead 0),
# then with the Python benches' 2M-cycle spin before each call, then back to back again (drift). nvidia-smi
# samples SM clock, power and throttle reasons every 50 ms throughout (a read-only query). Carries build/bin build/lib.
mkdir -p $OUT/c
source tools/gpu_env.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 50 > $OUT/c/smi.csv 2>&1 &
smi=$!
for run in 1:0 2:2000000 3:0; do
  n=${run%:*}; lead=${run#*:}
  echo "run $n lead $lead start $(date +%H:%M:%S.%N)" | tee -a $OUT/c/marks.txt
  MK_BENCH_OUT=$OUT/c/res$n timeout --foreground 170 build/bin/mkbench --lead-cycles $lead gemm > $OUT/c/gemm$n.log 2>&1
  echo "gemm rc=$?"
  echo "run $n gemm_rs start $(date +%H:%M:%S.%N)" | tee -a $OUT/c/marks.txt
  MK_BENCH_OUT=$OUT/c/res$n timeout --foreground 120 build/bin/mkbench --quick --lead-cycles $lead gemm_rs > $OUT/c/rs$n.log 2>&1
  echo "gemm_rs rc=$?"
  echo "run $n end $(date +%H:%M:%S.%N)" | tee -a $OUT/c/marks.txt
done
kill $smi
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
