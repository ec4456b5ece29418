# Session 68: the README's test command, `tools/test.sh`, run whole on the GPU machine for the first time, in a copy
# of this tree without build/ or .venv-test (as a new user would: set-up, build, every ctest tier; arguments go to
# test.sh: call 3 passed -j 8, the CPU tier in parallel). Bounded to ~9 min (MK_CALL_S);
# logs to $OUT. Before it, where GoogleTest and a torch-capable Python are on that machine.
set -u
echo "=== machine: uid $(id -u); python3 $(command -v python3); $(python3 -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1)"
ls -d /usr/include/gtest /usr/src/googletest /usr/lib/x86_64-linux-gnu/libgtest* 2>&1 | sed 's/^/=== /'
find / -xdev -path '*gtest/gtest.h' -not -path '/proc/*' 2>/dev/null | head -5 | sed 's/^/=== gtest.h: /'
fresh=/tmp/mk-fresh-t; rm -rf "$fresh"; mkdir -p "$fresh"
tar --exclude=./build --exclude='./build-*' --exclude=./.venv-test --exclude=./.carry -cf - . | tar -xf - -C "$fresh"
cd "$fresh"
t0=$(date +%s)
MK_BUILD_JOBS=16 timeout -k 10 ${MK_CALL_S:-500} tools/test.sh "$@" > "${OUT:-/tmp}/test_sh.log" 2>&1; rc=$?
echo "=== tools/test.sh: rc $rc in $(( $(date +%s) - t0 )) s (log: test_sh.log)"
grep -E "^\[setup\]|^\[test\]|RDMA network backends|CMake Error|Could NOT|tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Not Run|Skipped|Error" "${OUT:-/tmp}/test_sh.log" | head -60
tail -5 "${OUT:-/tmp}/test_sh.log"
cp build/Testing/Temporary/LastTest.log "${OUT:-/tmp}/" 2>/dev/null || true
