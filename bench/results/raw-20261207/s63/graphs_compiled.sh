# Session 63, call B: the graphs_alive change (770a9e37) on one GPU. First its own tests (mk_gpu_tests
# GraphUses.* and TpSingleRank.*, and GraphUses.* under compute-sanitizer memcheck), then tools/gpu_test.sh
# compiled whole (mk_gpu_tests, the dist tests with the ranks sharing the GPU: the TP graph-replay tests now also
# wait for graphs_alive() to turn false). Bounded by the tool's limit; ~5 min.
set -u
source tools/gpu_env.sh
timeout 120 build/bin/mk_gpu_tests --gtest_filter='GraphUses.*:TpSingleRank.*' > $OUT/own.log 2>&1; echo "own rc=$?"
grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|PASSED|FAILED TEST' $OUT/own.log | cut -c1-160
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/mk_gpu_tests \
    --gtest_filter='GraphUses.*:TpSingleRank.GraphsAlive*' > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"
grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/memcheck.log | head -5
tools/gpu_test.sh compiled > $OUT/compiled.log 2>&1; rc=$?
grep -E '^=== (PASSED|FAILED|SKIPPED)' $OUT/compiled.log | cut -c1-200
echo "gpu_test.sh compiled rc=$rc"
