# call A (session 45): `tools/gpu_test.sh bench` as a part for the first time (one GPU: mkbench --quick --iters 3
# ag_gemm gemm_rs gemm_ar with the ranks sharing the GPU as 1x2, 2x1 emu, 2x2 emu, 1x4): every overlap variant,
# 9431836's "local rows first" check included, checked against serial. Carries build/bin build/lib.
mkdir -p $OUT/a
start=$(date +%s)
timeout --foreground 560 tools/gpu_test.sh bench > $OUT/a/gpu_test_bench.log 2>&1
echo "gpu_test.sh bench rc=$? in $(( $(date +%s) - start )) s"
grep -h "===\|check\|rror\|failed" $OUT/a/gpu_test_bench.log | cut -c1-220 | head -40
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
