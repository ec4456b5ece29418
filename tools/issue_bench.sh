#!/usr/bin/env bash
# Runs the open issues' benchmarks from an existing build (build/bin + build/lib, e.g. carried to a lent
# GPU machine), in parts that each fit one bounded call (a lent machine stops a command after 600 s):
#
#   tools/issue_bench.sh tp [OUT]      TP ops: mkbench ag_gemm gemm_rs gemm_ar on 1x2 and 2x1 (emu),
#                                      torch_tp_bench.py (vs PyTorch's fused ops, 1x2)         ~60 s
#   tools/issue_bench.sh ring1x2 [OUT] torch_ring_attn_bench.py, 2 GPUs of one node, B = 1       ~120 s
#   tools/issue_bench.sh ring1x2b [OUT] the same, B = 4                                          ~360 s
#   tools/issue_bench.sh ring2x1 [OUT] the same as 2 emulated nodes (MK_RANKS_PER_NODE=1), B = 1 ~130 s
#   tools/issue_bench.sh ring2x1b [OUT] the same, B = 4                                          ~420 s
#                                      (20 timed rounds, MEASURING.md; the report is rewritten after each
#                                      shape, and tools/issue_targets.py merges the parts' rows per shape)
#   tools/issue_bench.sh attn [OUT]    attention_bench.py: the one-GPU engine against SDPA      ~60 s
#   tools/issue_bench.sh misc [OUT]    mkbench net_post and nvlink_count, python_overhead.py (W = 2),
#                                      ring_trace.py at 2k over emu (3 calls)                     ~70 s
# Issue [multi-gpu-run], on G = 4 or 8 GPUs, as 2 nodes of G/2 (emu between them) and 1 node of G; RPN
# (ranks per node: G/2 or G) is the one layout a call runs (both did not fit one call's 600 s):
#   tools/issue_bench.sh multi-tests OUT RPN  the dist tier and the torchrun TP / ring checks  <= 540 s
#   tools/issue_bench.sh multi-tp OUT RPN     mkbench ag_gemm gemm_rs gemm_ar; torch_tp_bench.py (1xG) <= 390 s
#   tools/issue_bench.sh multi-ring OUT RPN   torch_ring_attn_bench.py --quick                  <= 280 s
#   OUT under $OUT on a lent machine (only $OUT comes back), e.g. "$OUT/multi-tp-2x4"; '' for the default.
#   (written 2026-12-01 when no machine of more than 2 GPUs was lent: not run yet)
#
# Results (markdown + JSON, logs) go to OUT; without it (or given as ''), a fresh folder per call,
# bench/results/issue-<UTC stamp>-<part>/, which the script names first and last (bench/results holds every
# older run, whose reports tools/issue_targets.py would judge beside this one's). Needs 2 GPUs (attn: 1; multi-*:
# 4 or 8), torch and torchrun.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
source tools/gpu_env.sh
part=${1:-}
out=${2:-}
case "$part" in
  tp|ring1x2|ring1x2b|ring2x1|ring2x1b|attn|misc|multi-tests|multi-tp|multi-ring) ;;
  *) sed -n 2,27p "$0"; exit 2 ;;
esac
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" MK_LIBRARY="$PWD/build/lib/libmkernel.so"
ngpu=$(timeout -k 5 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
need=2; [ "$part" = attn ] && need=1  # (attn: one GPU)
if [ "${ngpu:-0}" -lt "$need" ]; then
  echo "issue_bench.sh $part: needs $need GPU(s) (have ${ngpu:-0})"
  exit 2
fi
if [ "${part#multi-}" != "$part" ] && [ "${ngpu:-0}" -ne 4 ] && [ "${ngpu:-0}" -ne 8 ]; then
  echo "issue_bench.sh $part: needs 4 or 8 GPUs (have ${ngpu:-0})"
  exit 2
fi
# multi-*: the one layout of ngpu ranks (ranks per node) this call runs, and its name.
layouts=${3:-}
if [ "${part#multi-}" != "$part" ] && [ "$layouts" != $(( ngpu / 2 )) ] && [ "$layouts" != "$ngpu" ]; then
  echo "issue_bench.sh $part: give the ranks per node, $(( ngpu / 2 )) or $ngpu, as the third argument (got" \
       "'$layouts'): one layout a call"
  exit 2
fi
name_of() { echo "$(( ngpu / $1 ))x$1"; }
if [ -z "$out" ]; then
  out=bench/results/issue-$(date -u +%Y%m%dT%H%M%SZ)-$part
elif [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "issue_bench.sh: note: $out already holds files; tools/issue_targets.py judges this run's reports beside" \
       "the older ones there (each row from the newest report that has it: an op's M, a ring or attention shape)"
fi
mkdir -p "$out" || exit 2
echo "issue_bench.sh $part: results go to $out"
source tools/gpu_steps.sh  # logged SECONDS LOG command...: bounded, output to OUT/LOG, says how it ended
case "$part" in
  tp)
    logged 120 mkbench-tp-1x2.log tools/mkrun -n 2 --timeout 115 build/bin/mkbench --out "$out" ag_gemm gemm_rs gemm_ar
    logged 120 mkbench-tp-2x1.log tools/mkrun -n 2 --timeout 115 env MK_RANKS_PER_NODE=1 \
        build/bin/mkbench --out "$out" ag_gemm gemm_rs gemm_ar
    logged 200 torch-tp.log torchrun --standalone --nproc_per_node=2 bench/torch_tp_bench.py --out "$out"
    ;;
  ring1x2|ring1x2b)
    b=1; [ "$part" = ring1x2b ] && b=4
    logged 560 "torch-ring-1x2-b$b.log" torchrun --standalone --nproc_per_node=2 bench/torch_ring_attn_bench.py \
        --batches "$b" --rounds 20 --warmup 2 --out "$out"
    ;;
  ring2x1|ring2x1b)
    b=1; [ "$part" = ring2x1b ] && b=4
    logged 560 "torch-ring-2x1-b$b.log" env MK_RANKS_PER_NODE=1 torchrun --standalone --nproc_per_node=2 \
        bench/torch_ring_attn_bench.py --batches "$b" --rounds 20 --warmup 2 --out "$out"
    ;;
  attn)
    logged 300 attention.log python3 bench/attention_bench.py --out "$out"
    ;;
  misc)
    logged 90 mkbench-net-post.log tools/mkrun -n 1 --timeout 85 build/bin/mkbench --out "$out" net_post
    logged 60 mkbench-nvlink-count.log tools/mkrun -n 2 --timeout 55 build/bin/mkbench --out "$out" nvlink_count
    logged 120 python-overhead.log torchrun --standalone --nproc_per_node=2 bench/python_overhead.py --out "$out"
    for i in 1 2 3; do
      logged 60 "ring-trace-2k-emu-$i.log" env MK_RANKS_PER_NODE=1 torchrun --standalone --nproc_per_node=2 \
          tools/ring_trace.py --seq 2048
    done
    ;;
  multi-tests)
    for rpn in $layouts; do
      l=$(name_of "$rpn")
      logged 240 "dist-$l.log" tools/mkrun -n "$ngpu" --timeout 235 env MK_RANKS_PER_NODE="$rpn" build/bin/mk_dist_tests
      for s in dist_tp_check dist_ring_attn_check; do
        logged 150 "$s-$l.log" env MK_RANKS_PER_NODE="$rpn" torchrun --standalone --nproc_per_node="$ngpu" \
            "tests/python/gpu/$s.py"
      done
    done
    ;;
  multi-tp)
    for rpn in $layouts; do
      l=$(name_of "$rpn")
      logged 150 "mkbench-tp-$l.log" tools/mkrun -n "$ngpu" --timeout 145 env MK_RANKS_PER_NODE="$rpn" \
          build/bin/mkbench --out "$out" ag_gemm gemm_rs gemm_ar
    done
    if [ "$layouts" = "$ngpu" ]; then
      logged 240 "torch-tp-1x$ngpu.log" torchrun --standalone --nproc_per_node="$ngpu" bench/torch_tp_bench.py \
          --out "$out"
    fi
    ;;
  multi-ring)
    for rpn in $layouts; do
      l=$(name_of "$rpn")
      logged 280 "torch-ring-$l.log" env MK_RANKS_PER_NODE="$rpn" torchrun --standalone --nproc_per_node="$ngpu" \
          bench/torch_ring_attn_bench.py --quick --out "$out"
    done
    ;;
esac
# The issues' targets against the reports in OUT: this part's, and whatever else OUT holds (a fresh folder by
# default; run tools/issue_targets.py over every part's folder together for the whole picture).
python3 tools/issue_targets.py "$out" > "$out/targets-$part.md" 2>&1 && cat "$out/targets-$part.md"
echo "issue_bench.sh $part: results in $out"
exit $fail
