# Session 70: the steps of `tools/gpu_test.sh python` (one-GPU branch, 2 or 4 ranks sharing the GPU) that call 12's
# bound cut off, in its order, with its commands, on the build carried from the CPU machine (build/lib at 108b39f).
# Bounded to MK_CALL_S (default 200 s) in all; each step to 120 s; logs to $OUT.
set -u
source tools/gpu_env.sh
t0=$(date +%s); o=${OUT:-/tmp}; py=$(tools/test_python.sh)
e=(env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1)
tr=("$py" -m torch.distributed.run --standalone)
i=0
step() {
  i=$((i + 1)); left=$(( ${MK_CALL_S:-200} - ($(date +%s) - t0) ))
  [ "$left" -gt 10 ] || { echo "=== NOT RUN (out of time): $*"; return; }
  b=$(( left < 120 ? left : 120 ))
  timeout -k 5 "$b" "$@" > "$o/rest_$i.log" 2>&1; r=$?
  echo "=== rc $r at $(( $(date +%s) - t0 )) s: ${*: -1} ($(grep -c . "$o/rest_$i.log") lines, rest_$i.log)"
}
step "${e[@]}" MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 examples/tp_mlp.py
step "${e[@]}" MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 examples/ring_attention.py
step "${e[@]}" MK_RANKS_PER_NODE=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
step "${e[@]}" MK_TIMEOUT_MS=1000 "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_ring_attn_timeout.py
step "${e[@]}" MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=4 tests/python/gpu/dist_tp_check.py
step "${e[@]}" MK_RANKS_PER_NODE=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
