#!/usr/bin/env bash
# 2026-12-03 d3: MPS (private daemon). (1) the scarce-SM tests now skip under MPS (1x2, 50%); (2) is the 2x1
# (emu) stop under MPS SM starvation? GemmAr* and the ring check at 45% per client (each grid leaves SMs free
# across both clients) against 50% (d2: both stop).
source tools/gpu_env.sh
R=$OUT/d3; mkdir -p $R; T0=$(date +%s)
exec > >(tee $R/all.log) 2>&1
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
sum() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|an MPS daemon|not complete after|stopped waiting|timed out after" "$1" | cut -c1-300 | sort | uniq -c | head -30; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mkmps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mkmps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
cleanup() { echo quit | timeout 10 nvidia-cuda-mps-control; sleep 2; tar czf $OUT/d3.tgz -C $OUT d3; }
trap cleanup EXIT
nvidia-cuda-mps-control -d; el "mps daemon rc=$?"; ls -la $CUDA_MPS_PIPE_DIRECTORY
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000
el "MPS 50% 1x2 scarce-SM tests"
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout 60 tools/mkrun -n 2 --timeout 50 build/bin/mk_dist_tests \
  --gtest_filter='*FinishesWith*' > $R/scarce_mps.log 2>&1
el "rc=$?"; sum $R/scarce_mps.log
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
for p in 45 50; do
  el "MPS $p% 2x1 GemmAr*"
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout 110 tools/mkrun -n 2 --timeout 100 env MK_RANKS_PER_NODE=1 \
    build/bin/mk_dist_tests --gtest_filter='GemmAr*' > $R/ar_2x1_$p.log 2>&1
  el "rc=$?"; sum $R/ar_2x1_$p.log
  el "MPS $p% 2x1 ring check"
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p MK_RANKS_PER_NODE=1 timeout 110 torchrun --standalone --nproc_per_node=2 \
    tests/python/gpu/dist_ring_attn_check.py > $R/ring_2x1_$p.log 2>&1
  el "rc=$?"; grep -v "^\[rank.\]:  " $R/ring_2x1_$p.log | grep -E "^ok|device:|FAILED" | cut -c1-300 | head -20
done
el done
