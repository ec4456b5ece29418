# call D (session 45): mkbench's call order, after call C found a call's time depends on the call before it
# (the power cap). One GPU, one rank: mkbench gemm (every shape; its CTA-count table mixes 16- to 132-CTA
# calls) and gemm_rs --quick (the one-rank diagnosis), in four runs: --fixed-order back to back (the old
# protocol), rotated (the new default) back to back, rotated with the Python benches' 2M-cycle spin, and
# --fixed-order again (drift). The tables' notes carry NVML's clock line (first run of bench/gpu_clocks.cpp);
# nvidia-smi samples too, as a cross-check (read-only). Carries build/bin build/lib.
mkdir -p $OUT/d
source tools/gpu_env.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 50 > $OUT/d/smi.csv 2>&1 &
smi=$!
for run in 1:--fixed-order:0 2:--rotated:0 3:--rotated:2000000 4:--fixed-order:0; do
  IFS=: read n order lead <<< "$run"
  flag=; [ "$order" = --fixed-order ] && flag=--fixed-order
  echo "run $n $order lead $lead start $(date +%H:%M:%S.%N)" | tee -a $OUT/d/marks.txt
  MK_BENCH_OUT=$OUT/d/res$n timeout --foreground 120 build/bin/mkbench $flag --lead-cycles $lead gemm > $OUT/d/gemm$n.log 2>&1
  echo "gemm rc=$?"
  MK_BENCH_OUT=$OUT/d/res$n timeout --foreground 100 build/bin/mkbench $flag --quick --lead-cycles $lead gemm_rs \
    > $OUT/d/rs$n.log 2>&1
  echo "gemm_rs rc=$?"
done
echo "end $(date +%H:%M:%S.%N)" >> $OUT/d/marks.txt
kill $smi
grep -h "gpu_clocks\|timing" $OUT/d/res1/*.md | head -2 | cut -c1-300
grep -h "GPU during" $OUT/d/gemm1.log | head -2 | cut -c1-300
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
