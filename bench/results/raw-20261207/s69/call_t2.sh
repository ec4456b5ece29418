# Session 69, after call 7 (tools/test.sh whole on the GPU machine, first time past set-up: 4 entries failed, fixed
# on the CPU machine): tools/test.sh -j 8 again in a copy of this tree without build/ or .venv-test, as a new user
# would (built there by that machine's g++, which links libstdc++ statically), then in the same copy, on what it
# built, tools/gpu_test.sh compiled: the GPU tier and the dist tier with 4 ranks sharing the GPU, never run before
# on a build of that toolchain. Bounded to ~7.5 min in all (MK_CALL_S, default 440 s); logs to $OUT.
set -u
fresh=/tmp/mk-fresh-t2; rm -rf "$fresh"; mkdir -p "$fresh"
tar --exclude=./build --exclude='./build-*' --exclude=./.venv-test --exclude=./.carry -cf - . | tar -xf - -C "$fresh"
cd "$fresh"
t0=$(date +%s)
MK_BUILD_JOBS=16 timeout -k 10 300 tools/test.sh -j 8 > "${OUT:-/tmp}/test_sh.log" 2>&1; rc=$?
echo "=== tools/test.sh -j 8: rc $rc in $(( $(date +%s) - t0 )) s (log: test_sh.log)"
grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Not Run|Skipped" "${OUT:-/tmp}/test_sh.log" | head -30
cp build/Testing/Temporary/LastTest.log "${OUT:-/tmp}/" 2>/dev/null || true
left=$(( ${MK_CALL_S:-440} - ($(date +%s) - t0) ))
echo "=== tools/gpu_test.sh compiled, bounded to $left s"
MK_GPU_TEST_STEP_S=200 timeout -k 5 "$left" tools/gpu_test.sh compiled > "${OUT:-/tmp}/gpu_test.log" 2>&1; g=$?
grep -E "^===|FAILED|PASSED|passed|failed|Skipped|skipped" "${OUT:-/tmp}/gpu_test.log" | grep -v "^\[       OK" | head -60
echo "=== gpu_test.sh compiled: rc $g in $(( $(date +%s) - t0 )) s"
