#!/usr/bin/env bash
# 2026-12-03 d6: MPS 50%, 2x1 (emu), both ranks on one GPU: does the emu stop depend on the SMs the op's grid
# leaves free? tools/wip/mps_emu_probe.py, GemmAr run() and RingAttention at several grid sizes.
source tools/gpu_env.sh
R=$OUT/d6; mkdir -p $R; T0=$(date +%s)
exec > >(tee $R/all.log) 2>&1
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mkmps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mkmps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
cleanup() { echo quit | timeout 10 nvidia-cuda-mps-control; sleep 2; tar czf $OUT/d6.tgz -C $OUT d6; }
trap cleanup EXIT
nvidia-cuda-mps-control -d; el "mps daemon rc=$?"
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=10000 MK_RANKS_PER_NODE=1 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
for cfg in "ar 0 200" "ar 56 200" "ar 40 200" "ar 24 200" "ring 0 100" "ring 40 100" "ring 24 100"; do
  set -- $cfg
  el "probe $cfg"
  timeout 60 torchrun --standalone --nproc_per_node=2 tools/wip/mps_emu_probe.py $cfg > $R/$1_$2.log 2>&1
  el "rc=$?"; grep -E "calls done|device:|not complete after|Error" $R/$1_$2.log | grep -v "^\[rank.\]:  " | cut -c1-300 | head -6
done
el done
