#!/usr/bin/env bash
# Runs the open issues' benchmarks from an existing build (build/bin + build/lib, e.g. carried to a lent
# GPU machine), in parts that each fit one bounded call (a lent machine stops a command after 600 s):
#
#   tools/issue_bench.sh tp [OUT]      TP ops: mkbench ag_gemm gemm_rs gemm_ar on 1x2 and 2x1 (emu),
#                                      torch_tp_bench.py (vs PyTorch's fused ops, 1x2)         ~60 s
#   tools/issue_bench.sh ring1x2 [OUT] torch_ring_attn_bench.py, 2 GPUs of one node              ~180 s
#   tools/issue_bench.sh ring2x1 [OUT] the same as 2 emulated nodes (MK_RANKS_PER_NODE=1)        ~160 s
#   tools/issue_bench.sh misc [OUT]    mkbench net_post, python_overhead.py (W = 2), ring_trace.py at 2k
#                                      over emu (3 calls)                                         ~60 s
#
# Results (markdown + JSON, logs) go to OUT (default bench/results). Needs 2 GPUs, torch and torchrun.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
source tools/gpu_env.sh
part=${1:-}
out=${2:-bench/results}
case "$part" in
  tp|ring1x2|ring2x1|misc) ;;
  *) sed -n 2,14p "$0"; exit 2 ;;
esac
mkdir -p "$out"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" MK_LIBRARY="$PWD/build/lib/libmkernel.so"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -lt 2 ]; then
  echo "issue_bench.sh: needs 2 GPUs (have ${ngpu:-0})"
  exit 2
fi
rc=0
step() {  # step SECONDS LOG command...: bounded, output to OUT/LOG, says how it ended
  local s=$1 log=$2
  shift 2
  local t0
  t0=$(date +%s)
  timeout "$s" "$@" > "$out/$log" 2>&1
  local r=$?
  echo "=== rc=$r in $(( $(date +%s) - t0 )) s: $* (log: $out/$log)"
  [ $r -eq 0 ] || rc=1
}
case "$part" in
  tp)
    step 120 mkbench-tp-1x2.log tools/mkrun -n 2 --timeout 115 build/bin/mkbench --out "$out" ag_gemm gemm_rs gemm_ar
    step 120 mkbench-tp-2x1.log tools/mkrun -n 2 --timeout 115 env MK_RANKS_PER_NODE=1 \
        build/bin/mkbench --out "$out" ag_gemm gemm_rs gemm_ar
    step 200 torch-tp.log torchrun --standalone --nproc_per_node=2 bench/torch_tp_bench.py --out "$out"
    ;;
  ring1x2)
    step 560 torch-ring-1x2.log torchrun --standalone --nproc_per_node=2 bench/torch_ring_attn_bench.py \
        --rounds 8 --warmup 2 --out "$out"
    ;;
  ring2x1)
    step 560 torch-ring-2x1.log env MK_RANKS_PER_NODE=1 torchrun --standalone --nproc_per_node=2 \
        bench/torch_ring_attn_bench.py --rounds 6 --warmup 2 --out "$out"
    ;;
  misc)
    step 90 mkbench-net-post.log tools/mkrun -n 1 --timeout 85 build/bin/mkbench --out "$out" net_post
    step 120 python-overhead.log torchrun --standalone --nproc_per_node=2 bench/python_overhead.py --out "$out"
    for i in 1 2 3; do
      step 60 "ring-trace-2k-emu-$i.log" env MK_RANKS_PER_NODE=1 torchrun --standalone --nproc_per_node=2 \
          tools/ring_trace.py --seq 2048
    done
    ;;
esac
exit $rc
