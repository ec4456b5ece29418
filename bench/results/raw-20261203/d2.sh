#!/usr/bin/env bash
# 2026-12-03 d2: under a private MPS daemon (two ranks at once on one GPU), after b4f8592 (GemmAr compute
# CTAs first): the co-residency probe at 100% (two clients), the TP dist tests 1x2 and 2x1 (emu) at 50%,
# and the ring attention check from Python 1x2 and 2x1 at 50%. Every step bounded.
source tools/gpu_env.sh
R=$OUT/d2; mkdir -p $R; T0=$(date +%s)
exec > >(tee $R/all.log) 2>&1
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
sum() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|tests ran|Skipped|transport runs|passed|failed|device:" "$1" | sort | uniq -c | head -40; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mkmps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mkmps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
cleanup() { echo quit | timeout 10 nvidia-cuda-mps-control; sleep 2; cp -r /tmp/mkmps/log $R/mpslog; tar czf $OUT/d2.tgz -C $OUT d2; }
trap cleanup EXIT
nvidia-cuda-mps-control -d; el "mps daemon rc=$?"
for p in 100; do
  el "probe pct=$p two clients"
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout 30 .carry/mps_probe 4 "A$p" > $R/probeA$p.log 2>&1 & pa=$!
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout 30 .carry/mps_probe 4 "B$p" > $R/probeB$p.log 2>&1
  wait $pa; cat $R/probeA$p.log $R/probeB$p.log   # wait on the pid: a bare wait also waits on tee (d1's stall)
done
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
for rpn in 2 1; do
  el "MPS 50% dist rpn=$rpn"
  timeout 160 tools/mkrun -n 2 --timeout 150 env MK_RANKS_PER_NODE=$rpn build/bin/mk_dist_tests \
    --gtest_filter="GemmAr*:GemmRs*:AgGemm*:GemmPeer*" > $R/mps_rpn$rpn.log 2>&1
  el "rc=$?"; sum $R/mps_rpn$rpn.log; grep -m3 "timed out\|stopped waiting" $R/mps_rpn$rpn.log | cut -c1-400
done
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
for rpn in 2 1; do
  el "MPS 50% dist_ring_attn_check rpn=$rpn"
  MK_RANKS_PER_NODE=$rpn timeout 120 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py \
    > $R/ring_rpn$rpn.log 2>&1
  el "rc=$?"; grep -v "^\[rank.\]:  " $R/ring_rpn$rpn.log | grep -iE "ok|pass|fail|error|device:|timed out|stopped" | head -20
done
el done
