#!/usr/bin/env bash
# Sets up, builds and runs mkbench on every GPU of this machine, one process
# per GPU. Extra arguments go to mkbench (e.g. --quick, or benchmark names).
# Then, where torch is installed (the system's Python, else tools/test.sh's
# .venv-test), the attention benchmarks against torch SDPA
# in their --quick form: the one-GPU engine (bench/attention_bench.py) and,
# on 2 or more GPUs, ring attention (bench/torch_ring_attn_bench.py, 2
# ranks); run those scripts directly for their full sweeps. Exits 2, saying
# so, on a machine without a GPU, before setting anything up or building
# (nvidia-smi -L, bounded, narrowed to CUDA_VISIBLE_DEVICES where it is set);
# non-zero, saying so, when a benchmark fails. The GPUs counted are those
# CUDA_VISIBLE_DEVICES leaves visible; mkbench's TP benchmarks need 2, 4 or
# 8 ranks and a node takes at most 8: with another count, the run uses the
# first 8, 4 or 2 of them and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

nogpu() {
  echo "bench.sh: no GPU: $*. mkernel's benchmarks need NVIDIA Hopper GPUs (sm_90a); nothing was set up," \
       "built or measured." >&2
  exit 2
}
if ! command -v nvidia-smi >/dev/null 2>&1; then
  nogpu "nvidia-smi (the NVIDIA driver's tool) is not installed"
fi
smi_rc=0
smi=$(timeout -k 5 20 nvidia-smi -L 2>&1) || smi_rc=$?
if [ "$smi_rc" -eq 124 ] || [ "$smi_rc" -eq 137 ]; then
  echo "bench.sh: nvidia-smi -L did not answer within 20 s (a hung GPU driver?); nothing was measured." >&2
  exit 2
fi
ngpu_all=$(printf '%s\n' "$smi" | grep -c '^GPU [0-9]' || true)
if [ "$ngpu_all" -eq 0 ]; then
  nogpu "nvidia-smi -L lists none (exit $smi_rc: $(printf '%s\n' "$smi" | head -1))"
fi
# The GPUs CUDA will show: every one, or CUDA_VISIBLE_DEVICES's entries (indices, or GPU-/MIG- UUID prefixes) up
# to the first that names no GPU (CUDA ignores the rest).
visible=()
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ]; then
  IFS=',' read -ra entries <<< "$CUDA_VISIBLE_DEVICES"
  for e in ${entries[@]+"${entries[@]}"}; do
    e=${e//[[:space:]]/}
    if [[ $e =~ ^[0-9]+$ ]]; then
      [ "$e" -lt "$ngpu_all" ] || break
    elif [[ $e == GPU-* || $e == MIG-* ]]; then
      printf '%s\n' "$smi" | grep -qF "(UUID: $e" || break
    else
      break
    fi
    visible+=("$e")
  done
  if [ "${#visible[@]}" -eq 0 ]; then
    nogpu "CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' leaves none of this machine's $ngpu_all visible"
  fi
else
  for ((i = 0; i < ngpu_all; i++)); do visible+=("$i"); done
fi
ngpu=${#visible[@]}
for k in 8 4 2 1; do
  if [ "$ngpu" -ge "$k" ]; then use=$k; break; fi
done
if [ "$use" -ne "$ngpu" ]; then
  export CUDA_VISIBLE_DEVICES
  CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${visible[*]:0:$use}")
  echo "bench.sh: $ngpu GPUs visible; running on $use of them (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES):" \
       "mkbench's TP benchmarks need 2, 4 or 8 ranks, and a node takes at most 8 (choose others with" \
       "CUDA_VISIBLE_DEVICES)"
  ngpu=$use
fi

# bounded NAME SECONDS CMD...: CMD under timeout, which puts it in a process group of its own (so that its TERM, and
# KILL 30 s later, reach torchrun's workers too); a terminal's Ctrl-C reaches only this script's group, so CMD runs
# in the background and this script's trap passes INT, TERM or HUP on to timeout, which signals that whole group
# (run in the foreground, bash would run the trap only after CMD ended). Says which benchmark ran out of time.
# Set before the set-up: a signal during it, or during mkbench (mkrun stops its ranks and returns), ends the script
# there instead of going on to the next step.
bench_pid=
bench_stop() {  # SIG RC: pass SIG to the running benchmark's timeout, wait for it (bounded by its -k), exit RC
  trap '' INT TERM HUP  # (once: a second signal, e.g. Ctrl-C again, would re-enter this mid-wait)
  set +e  # (a failing kill or wait must not end the script here, under set -e, with its own status instead of RC)
  if [ -n "$bench_pid" ]; then
    echo "bench.sh: SIG$1: stopping $bench_name (its process group)" >&2
    kill -"$1" "$bench_pid" 2>/dev/null; wait "$bench_pid" 2>/dev/null
  fi
  exit "$2"
}
trap 'bench_stop INT 130' INT; trap 'bench_stop TERM 143' TERM; trap 'bench_stop HUP 129' HUP
MK_SETUP_TESTS=0 tools/setup.sh  # (no GoogleTest: the benchmark builds no test tier)
tools/build.sh -DMK_BUILD_TESTS=OFF
source tools/gpu_env.sh
rc=0
tools/mkrun -n "$ngpu" --timeout 3000 build/bin/mkbench "$@" || rc=$?
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" MK_LIBRARY="$PWD/build/lib/libmkernel.so"
# The system's Python where it has torch, else the tests' venv where tools/test.sh put torch in it.
py=python3
if ! python3 -c 'import torch' 2>/dev/null && [ -x .venv-test/bin/python3 ] &&
   .venv-test/bin/python3 -c 'import torch' 2>/dev/null; then
  py=.venv-test/bin/python3
fi
bounded() {
  bench_name=$1; local s=$2 r=0
  shift 2
  timeout -k 30 "$s" "$@" & bench_pid=$!
  wait "$bench_pid" || r=$?
  bench_pid=
  if [ "$r" -eq 124 ] || [ "$r" -eq 137 ]; then
    echo "bench.sh: $bench_name ran out of time: not done within its $s s bound (exit $r: 124 after TERM," \
         "137 after KILL 30 s later)" >&2
  fi
  return "$r"
}
if "$py" -c 'import torch' 2>/dev/null; then
  bounded "the attention benchmark (bench/attention_bench.py --quick)" 900 \
    "$py" bench/attention_bench.py --quick || rc=$?
  if [ "$ngpu" -ge 2 ]; then
    bounded "the ring attention benchmark (bench/torch_ring_attn_bench.py --quick, 2 ranks)" 900 \
      "$py" -m torch.distributed.run --standalone --nproc_per_node=2 bench/torch_ring_attn_bench.py --quick || rc=$?
  else
    echo "bench.sh: ring attention benchmark skipped (needs 2 GPUs; have $ngpu)"
  fi
else
  echo "bench.sh: attention benchmarks skipped (no torch: pip install torch, or run tools/test.sh, which puts" \
       "torch into .venv-test)"
fi
exit $rc
