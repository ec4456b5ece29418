#!/usr/bin/env bash
# 2026-12-03 d1: GemmAr compute-first role order. (1) the new scarce-SM tests, time-sliced 1x2 and 2x1, new lib
# and the old one (21226e8, .carry/lib_old); (2) MPS: co-residency probe alone / two clients at once, 50% and
# 100%; the TP dist tests under MPS (1x2, 2x1 emu), new lib.
source tools/gpu_env.sh
R=$OUT/d1; mkdir -p $R; T0=$(date +%s)
exec > >(tee $R/all.log) 2>&1
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
sum() { grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|tests ran|Skipped|^one node|transport runs" "$1" | sort | uniq -c | head -30; }
F='*FinishesWith*'
for lib in new old; do
  L=$PWD/build/lib; [ $lib = old ] && L=$PWD/.carry/lib_old
  for rpn in 2 1; do
    el "time-sliced rpn=$rpn lib=$lib"
    timeout 150 tools/mkrun -n 2 --timeout 140 env LD_LIBRARY_PATH=$L:$LD_LIBRARY_PATH MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
      MK_RANKS_PER_NODE=$rpn build/bin/mk_dist_tests --gtest_filter="$F" > $R/ts_${lib}_rpn$rpn.log 2>&1
    el "rc=$?"; sum $R/ts_${lib}_rpn$rpn.log
  done
done
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mkmps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mkmps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d; el "mps daemon rc=$?"
cleanup() { echo quit | nvidia-cuda-mps-control; sleep 2; cp -r /tmp/mkmps/log $R/mpslog; tar czf $OUT/d1.tgz -C $OUT d1; }
trap cleanup EXIT
for p in 50 100; do
  el "probe pct=$p alone"; CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout 60 .carry/mps_probe 3 "alone$p"
  el "probe pct=$p two clients"
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout 60 .carry/mps_probe 8 "A$p" > $R/probeA$p.log 2>&1 &
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout 60 .carry/mps_probe 8 "B$p" > $R/probeB$p.log 2>&1
  wait; cat $R/probeA$p.log $R/probeB$p.log
done
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
for rpn in 2 1; do
  el "MPS 50% dist rpn=$rpn new lib"
  timeout 150 tools/mkrun -n 2 --timeout 140 env MK_RANKS_PER_NODE=$rpn build/bin/mk_dist_tests \
    --gtest_filter="GemmAr*:GemmRs*:AgGemm*:GemmPeer*" > $R/mps_rpn$rpn.log 2>&1
  el "rc=$?"; sum $R/mps_rpn$rpn.log; grep -m3 "timed out\|stopped waiting" $R/mps_rpn$rpn.log | cut -c1-400
done
el done
