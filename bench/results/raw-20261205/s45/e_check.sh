# call E (session 45): the commits after call D on a GPU: `tools/gpu_test.sh bench` (the TP benches with the
# balanced call order, ranks sharing the GPU as 1x2, 2x1, 2x2, 1x4; every row checked against serial), the
# ring bench at world 1 --quick (its report's new "GPU clocks" line from bench/gpu_clocks.py, through
# dist_timing.measure), mkbench --quick gemm_rs on one rank (the NVML line under each table, energy-counter
# power), and mkbench gemm with the balanced order then --fixed-order (the CTA-count table: does its 132-CTA
# call, which followed the 16-CTA call in most rounds before, change?). Carries build/bin build/lib.
mkdir -p $OUT/e
start=$(date +%s)
timeout --foreground 300 tools/gpu_test.sh bench > $OUT/e/gpu_test_bench.log 2>&1
echo "gpu_test.sh bench rc=$? in $(( $(date +%s) - start )) s"; grep -h "^=== \(PASSED\|FAILED\|SKIPPED\)" $OUT/e/gpu_test_bench.log | cut -c1-120
source tools/gpu_env.sh
export PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so
timeout --foreground 150 torchrun --standalone --nproc_per_node=1 bench/torch_ring_attn_bench.py --quick --rounds 5 \
  --warmup 1 --out $OUT/e/res > $OUT/e/ring.log 2>&1
echo "ring world 1 rc=$?"; grep -h "GPU clocks" $OUT/e/res/torch-ring-attn-*.md | cut -c1-330
MK_BENCH_OUT=$OUT/e/res timeout --foreground 100 build/bin/mkbench --quick gemm_rs > $OUT/e/rs.log 2>&1
echo "mkbench gemm_rs rc=$?"; grep -h "timing\|gpu_clocks" $OUT/e/res/mkbench-*.md | cut -c1-200
grep -h "GPU while" $OUT/e/rs.log | sed "s/.*GPU while/GPU while/" | cut -c1-300
for o in balanced fixed; do
  flag=; [ $o = fixed ] && flag=--fixed-order
  MK_BENCH_OUT=$OUT/e/res_$o timeout --foreground 120 build/bin/mkbench $flag gemm > $OUT/e/gemm_$o.log 2>&1
  echo "mkbench gemm $o rc=$?"
done
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
