#!/usr/bin/env bash
# 2026-12-03 d5: MPS 50%, 2x1 (emu): does the emu stop depend on hardware work queues? GemmAr* and the ring
# check with CUDA_DEVICE_MAX_CONNECTIONS=32 (default 8) against d2/d3 (default).
source tools/gpu_env.sh
R=$OUT/d5; mkdir -p $R; T0=$(date +%s)
exec > >(tee $R/all.log) 2>&1
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
sum() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|not complete after|stopped waiting|timed out after" "$1" | cut -c1-300 | sort | uniq -c | head -30; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mkmps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mkmps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
cleanup() { echo quit | timeout 10 nvidia-cuda-mps-control; sleep 2; tar czf $OUT/d5.tgz -C $OUT d5; }
trap cleanup EXIT
nvidia-cuda-mps-control -d; el "mps daemon rc=$?"
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 CUDA_DEVICE_MAX_CONNECTIONS=32
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
el "MPS 50% 2x1 GemmAr* connections=32"
timeout 110 tools/mkrun -n 2 --timeout 100 env MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests --gtest_filter='GemmAr*' \
  > $R/ar_2x1_c32.log 2>&1
el "rc=$?"; sum $R/ar_2x1_c32.log
el "MPS 50% 2x1 ring check connections=32"
MK_RANKS_PER_NODE=1 timeout 110 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py \
  > $R/ring_2x1_c32.log 2>&1
el "rc=$?"; grep -v "^\[rank.\]:  " $R/ring_2x1_c32.log | grep -E "^ok|device:|FAILED" | cut -c1-300 | head -20
el done
