#!/usr/bin/env bash
# Session 22 (1 GPU, ~4 minutes): does the side work wait behind work queued on the grid's stream (a false
# dependency through a shared hardware work queue)? tools/wip/mps_side_probe.cu with PROBE_QUEUED=both (a copy and a
# kernel queued behind the grid) and PROBE_STREAMS=K (K streams created in between), without MPS, under MPS alone
# and two clients at once; then GemmAr's 2x1 emu tests time-sliced (no MPS) with CUDA_DEVICE_MAX_CONNECTIONS=1 (8, the default, passes in tools/gpu_test.sh).
# Carry build/bin, build/lib, .carry. Logs to $OUT/queue.tgz.
cd "$(dirname "$0")/../../.."
source tools/gpu_env.sh
R=$OUT/queue; mkdir -p $R
P=.carry/mps_side_probe
el() { echo "[$(date +%T)] $*"; }
sweep() {  # label grid: every side work, K = 0..8, one iteration each; prints one summary line per side work
  local label=$1 g=$2
  for side in copy memop kernel kcopy copy_hi kernel_hi; do
    local line="$label $side:"
    for k in 0 1 2 3 4 5 6 7 8; do
      PROBE_QUEUED=both PROBE_STREAMS=$k timeout 20 $P $g $side 1 $label 50 >> $R/$label.log 2>&1
      line="$line $(tail -1 $R/$label.log | grep -q STARVED && echo S || echo .)"
    done
    echo "$line"
  done
}
sweep nomps -1 | tee $R/summary.txt
source tools/mps_daemon.sh  # (as run: the same steps written out here; moved to the helper afterwards)
trap 'mps_stop; tar czf $OUT/queue.tgz -C $OUT queue && rm -rf $R' EXIT
mps_start || exit 1
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 sweep mps_alone -8 | tee -a $R/summary.txt
el "two clients at once, K = 0, 3 iterations each"
for side in copy kernel kcopy copy_hi; do
  PROBE_QUEUED=both CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout 30 $P -8 $side 3 c0 100 > $R/two_${side}_0.log 2>&1 & p0=$!
  PROBE_QUEUED=both CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout 30 $P -8 $side 3 c1 100 > $R/two_${side}_1.log 2>&1 & p1=$!
  wait $p0; wait $p1
  echo "mps_two $side: $(cat $R/two_${side}_*.log | grep -c STARVED) of 6 starved" | tee -a $R/summary.txt
done
mps_stop
el "GemmAr 2x1 emu, time-sliced, by CUDA_DEVICE_MAX_CONNECTIONS"
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1
for c in 1; do
  CUDA_DEVICE_MAX_CONNECTIONS=$c timeout 100 tools/mkrun -n 2 --timeout 95 build/bin/mk_dist_tests \
    --gtest_filter='GemmAr*' > $R/gemm_ar_conn$c.log 2>&1
  el "connections $c: rc=$? $(grep -c '^\[       OK \]' $R/gemm_ar_conn$c.log) OK, $(grep -c '^\[  FAILED  \].*ms)' $R/gemm_ar_conn$c.log) FAILED"
  grep -o "emu: batch.*" $R/gemm_ar_conn$c.log | head -2
done
