#!/usr/bin/env bash
# Session 22 (1 GPU, ~5 minutes): what side work runs beside a grid that holds SMs, with and without MPS
# (tools/wip/mps_side_probe.cu, built here into .carry/mps_side_probe), then GemmAr's dist tests as 2x1 emu
# under MPS, 3 times, with the emu transport's new stall report (which part of the batch is stuck).
# Carry build/bin, build/lib, .carry. Logs to $OUT/side.tgz.
cd "$(dirname "$0")/../../.."
source tools/gpu_env.sh
R=$OUT/side; mkdir -p $R
P=.carry/mps_side_probe
el() { echo "[$(date +%T)] $*"; }
# A. No MPS, one client: which side work needs a free SM at all (grid 0 = every SM).
for c in "0 kernel" "-1 kernel" "0 memop" "0 copy" "0 ucopy"; do
  timeout 30 $P $c 2 nomps >> $R/a_nomps.log 2>&1
done
el "A done"; grep -c STARVED $R/a_nomps.log; grep iter $R/a_nomps.log
source tools/mps_daemon.sh  # (as run: the same steps written out here; moved to the helper afterwards)
trap 'cp -r $CUDA_MPS_LOG_DIRECTORY $R/mps_log 2>/dev/null; mps_stop; tar czf $OUT/side.tgz -C $OUT side && rm -rf $R' EXIT
mps_start || exit 1
export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
# C. MPS, one client alone.
for g in 66 65 58; do timeout 30 $P $g kernel 2 mps_alone >> $R/c_alone.log 2>&1; done
el "C done"; grep iter $R/c_alone.log
# B. MPS, two clients at once, the same grid and side work in each.
for g in 65 62 60 58 50; do
  for side in kernel kernel_hi memop copy ucopy; do
    timeout 40 $P $g $side 3 c0 > $R/b_${g}_${side}_0.log 2>&1 & p0=$!
    timeout 40 $P $g $side 3 c1 > $R/b_${g}_${side}_1.log 2>&1 & p1=$!
    wait $p0; wait $p1
    echo "grid $g $side: $(cat $R/b_${g}_${side}_*.log | grep -c STARVED) starved of 6; at once: $(cat $R/b_${g}_${side}_*.log | grep -o 'at once [0-9]*' | awk '{print $3}' | tr '\n' ' ')"
  done
done | tee $R/b_summary.txt
el "B done"
# D. GemmAr 2x1 emu under MPS (the intermittent stall), with the stall report.
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1
for i in 1 2 3; do
  timeout 60 tools/mkrun -n 2 --timeout 55 build/bin/mk_dist_tests --gtest_filter='GemmAr*' --gtest_repeat=3 \
    > $R/d_gemm_ar_$i.log 2>&1
  el "D $i rc=$? $(grep -c '^\[       OK \]' $R/d_gemm_ar_$i.log) OK, $(grep -c '^\[  FAILED  \].*ms)' $R/d_gemm_ar_$i.log) FAILED"
  grep -o "emu: batch.*" $R/d_gemm_ar_$i.log | head -3
done
