#!/usr/bin/env bash
# Session 21: the ring checks from Python under a private MPS daemon (50% each), with the claimed push.
cd "$(dirname "$0")/../../.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
dir=$(mktemp -d /tmp/mk_mps.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
trap 'echo quit | timeout 10 nvidia-cuda-mps-control; sleep 1; rm -rf $dir' EXIT
nvidia-cuda-mps-control -d || exit 1
export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000
for rpn in 2 1; do
  echo "=== ring check, MK_RANKS_PER_NODE=$rpn, MPS 50%"
  MK_RANKS_PER_NODE=$rpn timeout 200 torchrun --standalone --nproc_per_node=2 \
    tests/python/gpu/dist_ring_attn_check.py > $OUT/ring_mps_rpn$rpn.log 2>&1
  echo "rc=$?"; grep -E "^ok|FAIL|timed out|Error" $OUT/ring_mps_rpn$rpn.log | sort | uniq -c | head -20
done
