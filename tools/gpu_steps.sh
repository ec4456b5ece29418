# Sourced by tools/gpu_test.sh and tools/mps_test.sh: `run CMD...` runs one
# bounded step and says how it ended. Every step is bounded (a lent GPU
# machine stops a whole command after 600 s, losing the output of the steps
# after a hang): $step_s each (MK_GPU_TEST_STEP_S, default 240; a caller may
# set step_s=N for one step). Exit 77 is a skip; any other failure sets
# fail=1, which the caller returns. Each end line ends with the step's time.
#
# MK_STEP_TAG (set here, not by the caller; declared in include/mkernel/knob_list.inc): each step runs with
# MK_STEP_TAG=<this shell's pid>.<step number> in its environment, which every process it starts inherits. timeout
# --foreground signals only its own child (the step's command), so the workers of a `torchrun` or `mpirun` step,
# or anything a `bash -c` step started, outlived a timeout and held the GPU into the next step. When a step ends
# by a timeout (rc 124, or 137: KILLed), every process whose environment (/proc/PID/environ, as it was at exec)
# still holds the step's tag is KILLed, and the end line says how many were. A process that clears its
# environment (env -i) escapes this.
fail=0
step_s=${MK_GPU_TEST_STEP_S:-240}
_mk_step_n=0
_mk_step_tag=
_mk_step_killed=0
_mk_step_note=
_mk_step_new_tag() {  # sets _mk_step_tag to a tag no other step of this shell (or of a subshell of it) has
  _mk_step_n=$((_mk_step_n + 1))
  _mk_step_tag="${BASHPID:-$$}.$_mk_step_n"
}
# _mk_step_reap TAG: KILL every process (but this shell) whose environment holds MK_STEP_TAG=TAG; their number in
# _mk_step_killed. Up to 3 passes, while a pass finds a new one (one may fork while the pass runs).
_mk_step_reap() {
  local want="MK_STEP_TAG=$1" seen=" " e p kv new
  _mk_step_killed=0
  for _ in 1 2 3; do
    new=0
    for e in /proc/[0-9]*/environ; do
      p=${e#/proc/}; p=${p%/environ}
      if [ "$p" = "$$" ] || [ "$p" = "${BASHPID:-$$}" ] || [ ! -r "$e" ]; then continue; fi
      case $seen in *" $p "*) continue ;; esac
      while IFS= read -r -d '' kv; do
        if [ "$kv" = "$want" ]; then
          if kill -KILL "$p" 2>/dev/null; then
            seen+="$p "; new=1; _mk_step_killed=$((_mk_step_killed + 1))
          fi
          break
        fi
      done 2>/dev/null < "$e"
    done
    [ $new -eq 1 ] || break
  done
}
# _mk_step_timeout RC SECONDS: for a step that timed out (RC 124 or 137), KILL what it left and set _mk_step_note
# to the end line's words on it; otherwise _mk_step_note is empty.
_mk_step_timeout() {
  _mk_step_note=
  case $1 in
    124) _mk_step_note="timed out at $2 s (TERM)" ;;
    137) _mk_step_note="KILLed (the $2 s bound + 5 s, or from outside)" ;;
    *) return 0 ;;
  esac
  _mk_step_reap "$_mk_step_tag"
  _mk_step_note+="; killed $_mk_step_killed leftover process(es) of the step"
}
run() {
  echo "=== $*"
  local t0=$SECONDS
  _mk_step_new_tag
  # --foreground: the step stays in the call's process group, so a lent machine that stops the call at its
  # limit stops the step too (in a group of its own it ran on into the next call); -k: KILL 5 s after TERM.
  MK_STEP_TAG=$_mk_step_tag timeout --foreground -k 5 "$step_s" "$@"; local rc=$?
  _mk_step_timeout $rc "$step_s"
  local took="[$((SECONDS - t0)) s]"
  if [ $rc -eq 77 ]; then echo "=== SKIPPED ($rc): $* $took"
  elif [ $rc -ne 0 ]; then echo "=== FAILED ($rc): $*${_mk_step_note:+ -- $_mk_step_note} $took"; fail=1
  else echo "=== PASSED: $* $took"; fi
}
# logged SECONDS LOG command...: one bounded step with its output in $out/LOG (the caller sets out), one line
# saying how it ended (and, after a timeout, how many leftover processes were killed, as run's); a failure sets
# fail=1 (tools/issue_bench.sh, tools/sanitize_gpu.sh).
logged() {
  local s=$1 log=$2 t0=$SECONDS
  shift 2
  _mk_step_new_tag
  MK_STEP_TAG=$_mk_step_tag timeout --foreground -k 5 "$s" "$@" > "$out/$log" 2>&1  # (--foreground: as run's)
  local r=$?
  _mk_step_timeout $r "$s"
  echo "=== rc=$r in $((SECONDS - t0)) s: $* (log: $out/$log)${_mk_step_note:+ -- $_mk_step_note}"
  [ $r -eq 0 ] || fail=1
  return $r
}
