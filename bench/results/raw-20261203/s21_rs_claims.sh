#!/usr/bin/env bash
# Session 21, one H200: the standalone reduce-scatter / all-reduce's claimed items (device/roles/reduce_scatter.cuh
# rs_claimed). CPU builds first: .carry/ar_t = the tests (GemmArTest.FinishesWithTwoSmsFree) against the old
# library; build/ = the change. Every step bounded; logs tarred to $OUT/rs_claims.tgz even if the call is cut.
cd "$(dirname "$0")/../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/rs_claims; mkdir -p $R
trap 'tar czf $OUT/rs_claims.tgz -C $OUT rs_claims && rm -rf $R' EXIT
step() { local log=$1; shift; echo "[$(date +%T)] $log"; run "$@" > $R/$log 2>&1; tail -1 $R/$log; }  # run's verdict line shown
scarce='GemmArTest.FinishesWithTwoSmsFree:GemmRsTest.FinishesWithTwoSmsFree'
for v in old new; do
  bin=build/bin/mk_dist_tests; lib=$PWD/build/lib
  [ $v = old ] && bin=.carry/ar_t/mk_dist_tests && lib=$PWD/.carry/ar_t
  step_s=90 step scarce_$v.log tools/mkrun -n 2 --timeout 80 env LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-} MK_SHARE_GPUS=1 \
    MK_TIMEOUT_MS=20000 $bin --gtest_filter=$scarce
  grep -E "^\[  (PASSED|FAILED) |not complete" $R/scarce_$v.log | sort | uniq -c | head -8
done
tp='AgGemm*:GemmRs*:GemmAr*:GemmPeer*:Dist.Topology*:Dist.Symmetric*:Dist.Mismatched*:Net.Puts*'
step_s=150 step tp_1x2.log tools/mkrun -n 2 --timeout 140 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
  --gtest_filter="$tp"
step_s=150 step all_2x1.log tools/mkrun -n 2 --timeout 140 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 \
  build/bin/mk_dist_tests
step_s=150 step tp_2x2.log tools/mkrun -n 4 --timeout 140 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=2 \
  build/bin/mk_dist_tests --gtest_filter='GemmRs*:GemmAr*'
for t in "2:2" "2:1"; do
  IFS=: read np rpn <<< "$t"
  step_s=120 step py_tp_${np}_$rpn.log env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so MK_SHARE_GPUS=1 \
    MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=$rpn torchrun --standalone --nproc_per_node=$np \
    tests/python/gpu/dist_tp_check.py
done
step_s=200 step mps_test.log bash tools/mps_test.sh
grep -E "^=== " $R/mps_test.log
for f in $R/*.log; do echo "$f: $(grep -cE '^\[  FAILED  \]' $f) FAILED lines, $(grep -E '^\[  PASSED  \]' $f | head -1)"; done
exit $fail
