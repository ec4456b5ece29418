# call D (session 47), run inline: `tools/gpu_test.sh bench` (mkbench --quick's checks of both fused plans and
# every overlap baseline against serial, ranks sharing the H200 as 1x2, 2x1 emu, 2x2 emu, 1x4) at the standalone
# reduce's hardware rounding. Carries build/bin build/lib.
mkdir -p $OUT/d; source tools/gpu_env.sh; source tools/gpu_steps.sh; MK_GPU_TEST_STEP_S=200 timeout 560 tools/gpu_test.sh bench > $OUT/d/gpu_test.log 2>&1; echo "gpu_test rc=$?"; grep -h '^=== [PFS]' $OUT/d/gpu_test.log | cut -c1-250; grep -h "FAILED\|Failure\|timed out\|HUNG\|Error\|mismatch\|WRONG" $OUT/d/gpu_test.log | cut -c1-300 | head -20; tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
