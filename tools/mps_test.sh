#!/usr/bin/env bash
# Two ranks running at the same time on ONE GPU, through a private MPS
# daemon (pipe and log directories under a fresh /tmp directory, only this
# script's processes connect to it; quit on exit; no GPU setting changes):
# what the time-sliced sharing of tools/gpu_test.sh cannot show, kernels of
# both ranks resident together (bench/results/gemm-ar-role-order-20261203.md
# found GemmAr's role-order hang this way). Each client gets half the SMs
# (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50). Runs from an existing build:
#   - mk_dist_tests' TP tests as 1x2 (NVLink roles between the two ranks);
#   - the whole mk_dist_tests tier as 2x1 (emu between two emulated nodes;
#     the ops leave its delivery agent 1 SM: MK_NET_FREE_SMS);
#   - the ring attention checks from Python (torchrun, when present) as 1x2
#     and 2x1 emu (shapes, graph replay, torch.compile).
# Correctness only: timings of two half-GPUs through one HBM are no proxy
# for two GPUs. Exit 77 (skip) without a GPU or nvidia-cuda-mps-control.
# The 2x1 step failed in most runs until emu's writes moved into the kernels'
# delivery agent (emu's proxy stream work waited in a hardware work queue MPS
# clients share: bench/results/emu-work-queue-20261203.md); it passed since
# (emu-agent-20261203.md). A failure there is news.
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/gpu_env.sh
if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  echo "=== SKIPPED: no nvidia-cuda-mps-control here"; exit 77
fi
if ! timeout 20 nvidia-smi -L >/dev/null 2>&1; then echo "=== SKIPPED: no GPU here"; exit 77; fi
source tools/gpu_steps.sh  # run: one bounded step (MK_GPU_TEST_STEP_S each)
source tools/mps_daemon.sh  # mps_start, mps_stop: a private daemon
trap mps_stop EXIT
if ! mps_start; then echo "=== SKIPPED: the MPS daemon did not start"; exit 77; fi
export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000
run tools/mkrun -n 2 --timeout $((step_s - 10)) env MK_RANKS_PER_NODE=2 build/bin/mk_dist_tests \
    --gtest_filter='AgGemm*:GemmRs*:GemmAr*:GemmPeer*'
run tools/mkrun -n 2 --timeout $((step_s - 10)) env MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests
if command -v torchrun >/dev/null 2>&1; then
  for rpn in 2 1; do
    run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_RANKS_PER_NODE=$rpn \
        torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
  done
else
  echo "=== SKIPPED: the ring checks from Python (no torchrun here)"
fi
exit $fail
