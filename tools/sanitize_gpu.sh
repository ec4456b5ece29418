#!/usr/bin/env bash
# The device code under NVIDIA compute-sanitizer, from an existing build (build/bin + build/lib carried to
# a GPU machine): each step one bounded run, its log under OUT, a line saying how it ended.
#   tools/sanitize_gpu.sh TOOL [OUT] [PART...]
# TOOL: memcheck | racecheck | synccheck | initcheck. PART (default: all that fit one GPU):
#   gpu     mk_gpu_tests: the GEMM engine (standalone, hooks, owner reduce, split tiles, grouped), the TP
#           plans on one rank, signals, peer copies, delivery agents, plans outliving their communicator
#           (TpPlanLifetime, RingPlanLifetime: a use after free shows only here), the attention workspace, raw
#           pointers that are not the GPU's refused
#   attn    the attention engine from Python (tests/python/gpu/test_attention_gpu.py: ragged lengths, GQA,
#           causal, D 64 and 128)
#   dist    the fused TP ops on 2 ranks (sharing the GPU when there is one): AgGemm, GemmRs, GemmAr across
#           shapes and their standalone collectives, 1x2 (NVLink / one node)
#   emu     the same over 2 emulated nodes (MK_RANKS_PER_NODE=1: emu network, delivery agents)
# MK_SANITIZE_GPU_FILTER (a gtest filter) replaces the gpu part's list of tests, MK_SANITIZE_DIST_FILTER the dist
# and emu parts'; MK_SANITIZE_ATTN_K (a pytest -k expression, default matches_sdpa: 16 cases) the attn part's
# (racecheck needs fewer: over 170 s for the 16). (Before 2026-12-07 these and the two below had no MK_ prefix.)
# Not run: the tests that end a kernel on purpose (timeouts, aborts, starved roles: *Child*, TimedOut,
# Abort, Host*), whose trap the tool reports as an error; DeliveryAgent.FabricStaging*, whose kernel waits
# for a host thread's CUDA copies, which the tool holds back while a kernel runs (it hung there, 2026-12-04);
# TpSingleRankLog.*, a death test whose child (the binary run again) hung under the tool for over 80 s
# (session 49; it passes in 1 s with --target-processes application-only, and its plans are TpSingleRank*'s).
# A MK_SANITIZE_DIST_FILTER taking in Dist.SymmetricFreeFailing* or *CannotBeFreed* gets "Program hit
# cudaErrorStreamCapture..." reports (14 a 1x2 run, session 50): those tests make a free fail on purpose by
# capturing a stream; the tool counts the failing API calls as errors (exit 9), with no device memory error.
# Under initcheck the dist and emu parts also leave out *.CallsOnTwoStreamsAreOrdered (see below).
# Waits are bounded by MK_TIMEOUT_MS=600000 (the tool slows kernels down); MK_SANITIZE_STEP_S (seconds, at least
# 10) bounds every step instead of its default. Exit 1 when a step fails or the tool reports an error.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
tool=${1:-}
case "$tool" in
  memcheck | racecheck | synccheck | initcheck) ;;
  *) sed -n 2,28p "$0"; exit 2 ;;
esac
out=${2:-bench/results/sanitize}
shift $(( $# < 2 ? $# : 2 ))
# MK_SANITIZE_STEP_S: 0 or unset, each step's own bound; else a whole number of seconds, at least 10 (timeout takes
# 0 as no bound; the dist steps give mkrun 5 s less; a word broke their arithmetic). san_step_s: the bound, or empty.
san_step_s=${MK_SANITIZE_STEP_S:-0}
if ! [[ $san_step_s =~ ^(0|[1-9][0-9]*)$ ]] || { [ "$san_step_s" -ne 0 ] && [ "$san_step_s" -lt 10 ]; }; then
  echo "sanitize_gpu.sh: MK_SANITIZE_STEP_S must be 0 (each step's own bound) or a whole number of seconds, at" \
       "least 10 (got '$MK_SANITIZE_STEP_S')" >&2
  exit 2
fi
[ "$san_step_s" -eq 0 ] && san_step_s=
parts=" ${*:-gpu attn dist emu} "
mkdir -p "$out"
source tools/gpu_env.sh
command -v compute-sanitizer > /dev/null || { echo "sanitize_gpu.sh: compute-sanitizer not found"; exit 2; }
ngpu=$(timeout 20 nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${ngpu:-0}" -ge 1 ] || { echo "sanitize_gpu.sh: no GPU"; exit 77; }
share=; [ "${ngpu:-0}" -eq 1 ] && share="MK_SHARE_GPUS=1"
export MK_TIMEOUT_MS=600000 MK_NET_TIMEOUT_MS=600000
cs=(compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 100)
[ "$tool" = memcheck ] && cs+=(--leak-check no)
# MK_SANITIZE_ARGS: more compute-sanitizer arguments, e.g. for initcheck "--kernel-name-exclude kns=cublas,kns=nvjet"
# (cuBLAS reads its split-K workspace, written by TMA stores the tool does not see, and reports millions).
# shellcheck disable=SC2206
cs+=(${MK_SANITIZE_ARGS:-})
# racecheck reports hazards in every cuBLAS kernel (nvjet_*, the tests' reference; not ours). Excluding them
# (--kernel-name-exclude kns=nvjet) made the tool fail on a hardware exception it could not handle in the first
# GEMM test, which passes without the exclusion (bench/results/compute-sanitizer-20261204.md): they stay in, and
# each step says how many of its reports are theirs. Ours, expected (bench/results/session51-gpu-20261206.md):
# gemm_rs_kernel's and gemm_ar_kernel's read in epilogue.cuh's EndMark against epi_stage_held's / epi_finish's
# write of the tile slot (thread 32 polls the flag beside the barrier on purpose), and in gemm_ar_kernel one
# report of 8 hazards at claims.hpp's slot (unexplained; BAR.SYNC 0 on both sides). Any other report is new.
source tools/gpu_steps.sh  # logged: one bounded step, its output under OUT
step() {  # step SECONDS LOG command... (MK_SANITIZE_STEP_S, when set, bounds every step instead), then the tool's count
  logged "${san_step_s:-$1}" "${@:2}"
  local errs
  local kinds='Invalid|Error|Warning|Race|Barrier|Uninitialized|Internal|Host API|Program hit'
  errs=$(grep -cE "^========= ($kinds)" "$out/$2")
  local theirs
  theirs=$(grep -cE "^========= Error: Race reported between .* at nvjet_" "$out/$2")
  if [ "${theirs:-0}" -gt 0 ] 2> /dev/null; then
    echo "    ${errs} sanitizer reports, ${theirs} of them in the cuBLAS nvjet kernels"
  else
    echo "    ${errs} sanitizer reports"
  fi
  grep 'ERROR SUMMARY' "$out/$2"  # one line a process (a rank)
}
gpu_filter='Gemm.*:GemmHooks.*:TpSingleRank*:TpPlanSignals.*:DeliveryAgent.*:PeerCopy.*:CApiGpu.*'
gpu_filter+=':Signals.SingleRank*:Signals.BackToBack*:Signals.AddFrom*:Signals.Satisfied*'
gpu_filter+=':TpPlanLifetime.*:RingPlanLifetime.*:AttentionWorkspace.*:RawPointers*'
gpu_filter+=':-DeliveryAgent.FabricStaging*:TpSingleRankLog.*'
gpu_filter=${MK_SANITIZE_GPU_FILTER:-$gpu_filter}
dist_filter='AgGemmTest.MatchesReferenceAcrossShapes:AgGemmTest.StandaloneAllGather'
dist_filter+=':GemmRsTest.MatchesReferenceAcrossShapes:GemmRsTest.StandaloneReduceScatter'
dist_filter+=':GemmArTest.MatchesReferenceAcrossShapes:GemmArTest.StandaloneAllReduce'
dist_filter=${MK_SANITIZE_DIST_FILTER:-$dist_filter}  # e.g. '*:-Dist.PingPong*': the whole tier
# Under initcheck a launch waits for the kernels before it (session 50): the two-stream ordering tests' host,
# launching a call behind their gate kernel, cannot open the gate until it runs out (4 s: the test fails; a
# longer gate only hung). They stay out of every initcheck run.
if [ "$tool" = initcheck ]; then
  if [[ "$dist_filter" == *-* ]]; then dist_filter+=':*.CallsOnTwoStreamsAreOrdered'
  else dist_filter+='-*.CallsOnTwoStreamsAreOrdered'; fi
fi
want() { [[ "$parts" == *" $1 "* ]]; }
want gpu && step 240 "$tool-gpu.log" "${cs[@]}" build/bin/mk_gpu_tests --gtest_filter="$gpu_filter"
want attn && step 150 "$tool-attn.log" env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" \
  "${cs[@]}" python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_attention_gpu.py \
  -k "${MK_SANITIZE_ATTN_K:-matches_sdpa}"
want dist && step 260 "$tool-dist-1x2.log" tools/mkrun -n 2 --timeout $(( ${san_step_s:-260} - 5 )) env $share \
  "${cs[@]}" build/bin/mk_dist_tests --gtest_filter="$dist_filter"
want emu && step 220 "$tool-dist-2x1.log" tools/mkrun -n 2 --timeout $(( ${san_step_s:-220} - 5 )) \
  env $share MK_RANKS_PER_NODE=1 \
  "${cs[@]}" build/bin/mk_dist_tests --gtest_filter="$dist_filter"
exit $fail
