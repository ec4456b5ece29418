# call B (session 48): `tools/gpu_test.sh bench` (mkbench --quick's checks of both fused plans and every overlap
# baseline against serial, now also after the timing on fresh data; ranks sharing one GPU as 1x2, 2x1 emu, 2x2 emu,
# 1x4), then mkbench with an unwritable --out (exit 2 before anything runs). Carries build/bin build/lib.
mkdir -p $OUT/b; source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=200 timeout 500 tools/gpu_test.sh bench > $OUT/b/gpu_test.log 2>&1; echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log | cut -c1-250
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error\|mismatch\|WRONG" $OUT/b/gpu_test.log | cut -c1-300 | head -20
grep -h "after the timing" $OUT/b/gpu_test.log | cut -c1-200 | head -8
timeout 30 build/bin/mkbench --out /proc/self/no-such-dir --quick ag_gemm; echo "unwritable --out rc=$?"
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
