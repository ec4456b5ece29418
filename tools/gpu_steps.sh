# Sourced by tools/gpu_test.sh and tools/mps_test.sh: `run CMD...` runs one
# bounded step and says how it ended. Every step is bounded (a lent GPU
# machine stops a whole command after 600 s, losing the output of the steps
# after a hang): $step_s each (MK_GPU_TEST_STEP_S, default 240; a caller may
# set step_s=N for one step), a positive whole number (refused otherwise:
# timeout's 0 is no bound). Exit 77 is a skip (a failure where the caller set
# skip_fails, whose words say why); any other failure sets fail=1, which the
# caller returns. Each end line ends with the step's time.
#
# MK_STEP_TAG (set here, not by the caller; declared in include/mkernel/knob_list.inc): each step runs with
# MK_STEP_TAG=<this shell's pid>.<step number> in its environment, which every process it starts inherits. timeout
# --foreground signals only its own child (the step's command), so the workers of a `torchrun` or `mpirun` step,
# or anything a `bash -c` step started, outlived a timeout and held the GPU into the next step. When a step ends
# (by a timeout or not: `bash -c 'sleep 47 & exit 3'` leaves its sleep as well), every process whose environment
# (/proc/PID/environ, as it was at exec) still holds the step's tag is KILLed, and the end line says how many were.
# A process that clears its environment (env -i) escapes this. A step's 124 or 137 is called its timeout only when
# the step ran its whole bound: before that, it is the command's own status (e.g. 124 from mkrun's --timeout).
fail=0
step_s=${MK_GPU_TEST_STEP_S:-240}
# _mk_step_bounded S: S is a positive whole number of seconds (timeout takes 0 as no bound at all).
_mk_step_bounded() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
if ! _mk_step_bounded "$step_s"; then
  echo "gpu_steps.sh: MK_GPU_TEST_STEP_S must be a positive whole number of seconds (got '$step_s'; 0 would" \
       "leave every step unbounded)" >&2
  exit 2
fi
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
# _mk_step_end RC SECONDS T0: after a step (bound SECONDS, started at $SECONDS T0) that returned RC: KILL what it
# left running and set _mk_step_note to the end line's words on how it ended (empty: by itself, leaving nothing).
_mk_step_end() {
  _mk_step_note=
  # (whole seconds: a timeout always counts as one; a command's own 124 in the bound's last second may too)
  if [ $((SECONDS - $3)) -ge "$2" ]; then
    case $1 in
      124) _mk_step_note="timed out at $2 s (TERM)" ;;
      137) _mk_step_note="KILLed (the $2 s bound + 5 s, or from outside)" ;;
    esac
  elif [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then
    _mk_step_note="the command's own exit status $1, before the step's $2 s bound (not the step's timeout)"
  fi
  _mk_step_reap "$_mk_step_tag"
  if [ "$_mk_step_killed" -gt 0 ]; then
    _mk_step_note+="${_mk_step_note:+; }killed $_mk_step_killed leftover process(es) of the step"
  fi
}
run() {
  echo "=== $*"
  local t0=$SECONDS
  if ! _mk_step_bounded "$step_s"; then
    echo "=== FAILED: $* -- not run: step_s='$step_s' is no positive whole number of seconds (0: no bound)"; fail=1
    return
  fi
  _mk_step_new_tag
  # --foreground: the step stays in the call's process group, so a lent machine that stops the call at its
  # limit stops the step too (in a group of its own it ran on into the next call); -k: KILL 5 s after TERM.
  MK_STEP_TAG=$_mk_step_tag timeout --foreground -k 5 "$step_s" "$@"; local rc=$?
  _mk_step_end $rc "$step_s" "$t0"
  local took="[$((SECONDS - t0)) s]" n=${_mk_step_note:+ -- $_mk_step_note}
  if [ $rc -eq 77 ] && [ -n "${skip_fails:-}" ]; then
    echo "=== FAILED (77, a skip where $skip_fails): $*$n $took"; fail=1
  elif [ $rc -eq 77 ]; then echo "=== SKIPPED ($rc): $*$n $took"
  elif [ $rc -ne 0 ]; then echo "=== FAILED ($rc): $*$n $took"; fail=1
  else echo "=== PASSED: $*$n $took"; fi
}
# logged SECONDS LOG command...: one bounded step with its output in $out/LOG (the caller sets out), one line
# saying how it ended (and how many leftover processes were killed, as run's); a failure sets
# fail=1 (tools/issue_bench.sh, tools/sanitize_gpu.sh).
logged() {
  local s=$1 log=$2 t0=$SECONDS
  shift 2
  if ! _mk_step_bounded "$s"; then
    echo "=== not run: $* (log: $out/$log) -- bound '$s' is no positive whole number of seconds (0: no bound)"
    fail=1; return 2
  fi
  _mk_step_new_tag
  MK_STEP_TAG=$_mk_step_tag timeout --foreground -k 5 "$s" "$@" > "$out/$log" 2>&1  # (--foreground: as run's)
  local r=$?
  _mk_step_end $r "$s" "$t0"
  echo "=== rc=$r in $((SECONDS - t0)) s: $* (log: $out/$log)${_mk_step_note:+ -- $_mk_step_note}"
  [ $r -eq 0 ] || fail=1
  return $r
}
