# call G (session 31): racecheck over mk_gpu_tests again without excluding cuBLAS's kernels (call F's exclusion
# ended in "Internal Sanitizer Error: failed to handle a hardware exception" in Gemm.FixedAndRandomShapesMatchCublas),
# print limit 100: is the exception the exclusion's, and are any of call E's 7 unshown reports ours?
mkdir -p $OUT/g
SANITIZE_STEP_S=110 tools/sanitize_gpu.sh racecheck $OUT/g gpu; echo "rc=$?"
grep -v "Host Frame" $OUT/g/racecheck-gpu.log | grep -E "^========= (Error|Warning|Internal)" | sed -E 's/\+0x[0-9a-f]+//g' | sort | uniq -c | sort -rn | head -30
grep -E "PASSED|FAILED  \] [0-9]+ tests|SUMMARY" $OUT/g/racecheck-gpu.log
tar czf $OUT/g-out.tgz -C $OUT g; rm -rf $OUT/g
