#!/usr/bin/env bash
# 2026-12-03 d8: MK_NET_FREE_SMS (auto: 8 under MPS). MPS 50%, 2x1 (emu), both ranks on one GPU at once: the
# whole dist tier, then the ring check from Python; time-sliced 2x1 TP tests (auto: 1, as before).
source tools/gpu_env.sh
R=$OUT/d8; mkdir -p $R; T0=$(date +%s)
exec > >(tee $R/all.log) 2>&1
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
sum() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|not complete after|stopped waiting|timed out after|SMs free" "$1" | cut -c1-300 | sort | uniq -c | head -40; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mkmps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mkmps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
cleanup() { echo quit | timeout 10 nvidia-cuda-mps-control; sleep 2; tar czf $OUT/d8.tgz -C $OUT d8; }
trap cleanup EXIT
nvidia-cuda-mps-control -d; el "mps daemon rc=$?"
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1
el "MPS 50% 2x1 whole dist tier"
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_LOG=info timeout 170 tools/mkrun -n 2 --timeout 160 build/bin/mk_dist_tests \
  > $R/mps_2x1.log 2>&1
el "rc=$?"; sum $R/mps_2x1.log
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
el "MPS 50% 2x1 ring check"
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout 100 torchrun --standalone --nproc_per_node=2 \
  tests/python/gpu/dist_ring_attn_check.py > $R/ring_mps_2x1.log 2>&1
el "rc=$?"; grep -v "^\[rank.\]:  " $R/ring_mps_2x1.log | grep -E "^ok|device:|FAILED" | cut -c1-300 | head -20
echo quit | timeout 10 nvidia-cuda-mps-control; sleep 2
el "after quit:"; ls -la $CUDA_MPS_PIPE_DIRECTORY
el "time-sliced 2x1 TP tests (no MPS)"
env -u CUDA_MPS_PIPE_DIRECTORY MK_LOG=info timeout 150 tools/mkrun -n 2 --timeout 140 env MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
  --gtest_filter='AgGemm*:GemmRs*:GemmAr*:Net*' > $R/ts_2x1.log 2>&1
el "rc=$?"; sum $R/ts_2x1.log
el done
