#!/usr/bin/env bash
# mkbench's command line (no GPU needed: options are read before any device call): each bad option or value
# exits 2 with a message naming it, before anything runs; --help lists every option.
#   tests/cpu/mkbench_cli.sh path/to/mkbench
set -uo pipefail
bin=$1
fail=0
expect_refused() {  # args... : exit 2 and a message naming the first argument
  local out rc
  out=$("$bin" "$@" 2>&1); rc=$?
  if [ "$rc" -ne 2 ] || [[ "$out" != *"$1"* ]]; then
    echo "FAILED: mkbench $* exited $rc (want 2, naming $1): $out"; fail=1
  fi
}
expect_refused --lead-cycles -3
expect_refused --lead-cycles x1
expect_refused --lead-cycles 2000000000
expect_refused --lead-cycles
expect_refused --iters 0
expect_refused --warmup abc
expect_refused --no-such-option
expect_refused no_such_benchmark
# --fixed-order is an option (no value): the argument after it is read as a benchmark
out=$("$bin" --fixed-order no_such_benchmark2 2>&1); rc=$?
if [ "$rc" -ne 2 ] || [[ "$out" != *"unknown benchmark 'no_such_benchmark2'"* ]]; then
  echo "FAILED: mkbench --fixed-order no_such_benchmark2 exited $rc (want 2, naming the benchmark): $out"; fail=1
fi
# a results directory that cannot be made or written is refused before anything runs (exit 2, naming it)
for bad in /proc/self/mkbench-no-such-dir /dev/null; do
  out=$("$bin" --out "$bad" --quick 2>&1); rc=$?
  if [ "$rc" -ne 2 ] || [[ "$out" != *"$bad"* ]]; then
    echo "FAILED: mkbench --out $bad exited $rc (want 2, naming the path): $out"; fail=1
  fi
done
out=$(MK_BENCH_OUT=/proc/self/mkbench-env-dir "$bin" --quick 2>&1); rc=$?
if [ "$rc" -ne 2 ] || [[ "$out" != *"/proc/self/mkbench-env-dir"* ]]; then
  echo "FAILED: MK_BENCH_OUT=/proc/self/mkbench-env-dir mkbench exited $rc (want 2, naming the path): $out"; fail=1
fi
# without a GPU (none visible: CUDA_VISIBLE_DEVICES empty, on any machine) a run stops before measuring anything
# and leaves no results directory it made; nor does a path it cannot write
tmp=$(mktemp -d)
out=$(CUDA_VISIBLE_DEVICES= "$bin" --out "$tmp/a/b" --quick 2>&1); rc=$?
if [ "$rc" -ne 2 ] || [[ "$out" != *"no CUDA GPU"* ]] || [ -e "$tmp/a" ]; then
  echo "FAILED: mkbench --out $tmp/a/b without a GPU exited $rc (want 2, saying no GPU, leaving no $tmp/a): $out"
  fail=1
fi
mkdir "$tmp/kept"
CUDA_VISIBLE_DEVICES= "$bin" --out "$tmp/kept" --quick > /dev/null 2>&1
[ -d "$tmp/kept" ] || { echo "FAILED: mkbench without a GPU removed a results directory it did not make"; fail=1; }
if [ "$(id -u)" -ne 0 ]; then  # (root writes through a read-only mode)
  mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
  out=$(CUDA_VISIBLE_DEVICES= "$bin" --out "$tmp/ro/x/y" --quick 2>&1); rc=$?
  [ "$rc" -eq 2 ] || { echo "FAILED: mkbench --out under a read-only folder exited $rc (want 2): $out"; fail=1; }
  chmod 755 "$tmp/ro"
fi
# (as root too: a results path under a regular file cannot be made by anyone)
touch "$tmp/file"
out=$(CUDA_VISIBLE_DEVICES= "$bin" --out "$tmp/file/x" --quick 2>&1); rc=$?
if [ "$rc" -ne 2 ] || [[ "$out" != *"$tmp/file/x"* ]] || [[ "$out" != *"cannot make the results directory"* ]]; then
  echo "FAILED: mkbench --out under a regular file exited $rc (want 2, naming the path it cannot make): $out"
  fail=1
fi
rm -rf "$tmp"
help=$("$bin" --help 2>&1) || { echo "FAILED: mkbench --help exited non-zero"; fail=1; }
for opt in --out --iters --warmup --lead-cycles --fixed-order --quick --list; do
  [[ "$help" == *"$opt"* ]] || { echo "FAILED: mkbench --help does not list $opt"; fail=1; }
done
[ "$fail" -eq 0 ] && echo "mkbench_cli: ok"
exit $fail
