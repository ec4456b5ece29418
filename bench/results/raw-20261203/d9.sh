#!/usr/bin/env bash
# 2026-12-03 d9: MPS found by cudaDevAttrMpsEnabled (not the pipe file, which outlives the daemon: d8). MPS 50%:
# 2x1 GemmAr* (8 free SMs); then without MPS 2x1 GemmAr* (1 free SM).
source tools/gpu_env.sh
R=$OUT/d9; mkdir -p $R; T0=$(date +%s)
exec > >(tee $R/all.log) 2>&1
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
sum() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|not complete after|stopped waiting|timed out after|SMs free|shared through MPS" "$1" | cut -c1-300 | sort | uniq -c | head -30; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mkmps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mkmps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
cleanup() { echo quit | timeout 10 nvidia-cuda-mps-control; sleep 1; tar czf $OUT/d9.tgz -C $OUT d9; }
trap cleanup EXIT
nvidia-cuda-mps-control -d; el "mps daemon rc=$?"
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
el "MPS 50% 2x1 GemmAr*"
MK_LOG=info timeout 90 tools/mkrun -n 2 --timeout 80 env MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests \
  --gtest_filter='GemmAr*' > $R/mps_ar_2x1.log 2>&1
el "rc=$?"; sum $R/mps_ar_2x1.log
echo quit | timeout 10 nvidia-cuda-mps-control; sleep 2
el "no MPS (the pipe files stay), 2x1 GemmAr*"
MK_LOG=info timeout 100 tools/mkrun -n 2 --timeout 90 env MK_RANKS_PER_NODE=1 MK_TIMEOUT_MS=60000 \
  build/bin/mk_dist_tests --gtest_filter='GemmAr*' > $R/ts_ar_2x1.log 2>&1
el "rc=$?"; sum $R/ts_ar_2x1.log
el done
