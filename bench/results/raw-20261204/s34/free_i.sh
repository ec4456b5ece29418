# call I (session 34): SymmetricHeap::free exchanges each rank's sync outcome instead of a barrier after a sync that
# threw alone (working tree on e454668): new test Dist.SymmetricFreeFailingOnOneRankFailsOnEveryRank (the last rank
# frees while it captures a stream in global mode) with the other symmetric tests, 1x2, 2x1 emu and 2x2 as 4 ranks,
# ranks sharing the GPU. Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/i
source tools/gpu_env.sh
F='Dist.Symmetric*:Dist.Mismatched*:Dist.Topology*'
for cfg in "2 MK_RANKS_PER_NODE=2" "2 MK_RANKS_PER_NODE=1" "4 MK_RANKS_PER_NODE=2"; do
  set -- $cfg
  timeout 80 tools/mkrun -n $1 --timeout 70 env $2 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter="$F" > $OUT/i/run_$1_$2.log 2>&1
  echo "n=$1 $2 rc=$?"; grep -hE "^\[  (PASSED|FAILED) |^\[  FAILED  \] " $OUT/i/run_$1_$2.log | sort | uniq -c
done
grep -h -A3 "SymmetricFreeFailing" $OUT/i/run_2_MK_RANKS_PER_NODE=2.log | head -12
tar czf $OUT/i-out.tgz -C $OUT i; rm -rf $OUT/i
