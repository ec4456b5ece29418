# Sourced by tools/gpu_test.sh and tools/mps_test.sh: `run CMD...` runs one
# bounded step and says how it ended. Every step is bounded (a lent GPU
# machine stops a whole command after 600 s, losing the output of the steps
# after a hang): $step_s each (MK_GPU_TEST_STEP_S, default 240; a caller may
# set step_s=N for one step). Exit 77 is a skip; any other failure sets
# fail=1, which the caller returns. Each end line ends with the step's time.
fail=0
step_s=${MK_GPU_TEST_STEP_S:-240}
run() {
  echo "=== $*"
  local t0=$SECONDS
  # --foreground: the step stays in the call's process group, so a lent machine that stops the call at its
  # limit stops the step too (in a group of its own it ran on into the next call); -k: KILL 5 s after TERM.
  timeout --foreground -k 5 "$step_s" "$@"; local rc=$?
  local took="[$((SECONDS - t0)) s]"
  if [ $rc -eq 77 ]; then echo "=== SKIPPED ($rc): $* $took"; elif [ $rc -ne 0 ]; then echo "=== FAILED ($rc): $* $took"; fail=1
  else echo "=== PASSED: $* $took"; fi
}
# logged SECONDS LOG command...: one bounded step with its output in $out/LOG (the caller sets out), one line
# saying how it ended; a failure sets fail=1 (tools/issue_bench.sh, tools/sanitize_gpu.sh).
logged() {
  local s=$1 log=$2 t0=$SECONDS
  shift 2
  timeout --foreground -k 5 "$s" "$@" > "$out/$log" 2>&1  # (--foreground: as run's)
  local r=$?
  echo "=== rc=$r in $((SECONDS - t0)) s: $* (log: $out/$log)"
  [ $r -eq 0 ] || fail=1
  return $r
}
