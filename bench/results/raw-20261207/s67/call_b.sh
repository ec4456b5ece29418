# Session 67, with less device time left: call.sh's part (2) alone (no carried build needed): the
# README's benchmark command itself, `tools/bench.sh --quick`, set-up and build included, in a copy of this tree
# without build/ (before 6766064 its set-up stopped on this machine, which has no RDMA headers and no apt; now the
# build leaves the verbs and fabric backends out and says so). Bounded to ~6 min; reports copied to $OUT.
set -u
small=skipped
echo "=== machine: uid $(id -u); $(command -v ninja g++ cmake apt-get | tr '\n' ' ')"
ls -d /usr/include/infiniband /usr/include/rdma 2>&1 | sed 's/^/=== /'
fresh=/tmp/mk-fresh; rm -rf "$fresh"; mkdir -p "$fresh"
tar --exclude=./build --exclude='./build-*' --exclude=./.venv-test --exclude=./.carry -cf - . | tar -xf - -C "$fresh"
cd "$fresh"
t0=$(date +%s); touch /tmp/mk-fresh.t0
MK_BUILD_JOBS=16 timeout -k 10 340 tools/bench.sh --quick > "${OUT:-/tmp}/bench_sh.log" 2>&1; rc=$?
echo "=== tools/bench.sh --quick: rc $rc in $(( $(date +%s) - t0 )) s (log: bench_sh.log)"
grep -E "^\[setup\]|RDMA network backends|mkernel: no <|CMake Warning|bench.sh:|FAILED|Error" "${OUT:-/tmp}/bench_sh.log" | head -30
mkdir -p "${OUT:-/tmp}/bench"
find bench/results -maxdepth 1 -type f -newer /tmp/mk-fresh.t0 -exec cp {} "${OUT:-/tmp}/bench/" \; -print
echo "small=$small bench_rc=$rc"
