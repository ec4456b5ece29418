#!/usr/bin/env bash
# 1 GPU (~2.5 minutes; session 21): the claimed-push patches (then tools/wip/{ring,ag}-claimed-push.patch, on main since) on the device.
# Build here first, from a clean main (build/ then holds all four patches, .carry/ring_t main + the two tests,
# .carry/lib_main main's library):
#   tools/build.sh && mkdir -p .carry/lib_main && cp build/lib/libmkernel.so .carry/lib_main/
#   git apply tools/wip/ring-scarce-test.patch tools/wip/ag-scarce-test.patch && tools/build.sh &&
#     mkdir -p .carry/ring_t && cp build/bin/mk_dist_tests build/lib/libmkernel.so .carry/ring_t/
#   git apply tools/wip/ring-claimed-push.patch tools/wip/ag-claimed-push.patch && tools/build.sh
# then on the device (carry build/bin, build/lib, .carry): bash tools/wip/claimed-push.sh
# 1. main + the tests: RingAttnDist.FinishesWithTwoSmsFree, AgGemmTest.FinishesWithTwoSmsFree, 1x2 time-sliced
#    (expected to FAIL: the hazard);
# 2. patched: the same tests (expected to pass), mk_gpu_tests, the AgGemm dist tests 1x2 (time-sliced), the ring
#    checks from Python (1x2, 2x1 emu, the timeout; ranks sharing the GPU);
# 3. the ring kernel at one rank, main's library and the patched one alternating (bench/ring_engine_1gpu.py).
cd "$(dirname "$0")/../../.."
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
R=$OUT/claimed; mkdir -p $R
trap 'tar czf $OUT/claimed.tgz -C $OUT claimed && rm -rf $R' EXIT  # the logs come back even if the call is cut
el() { echo "[$(date +%T)] $*"; }
for v in test_only patched; do
  bin=build/bin/mk_dist_tests; lib=$PWD/build/lib
  [ $v = test_only ] && bin=.carry/ring_t/mk_dist_tests && lib=$PWD/.carry/ring_t
  el "the two scarce-SM tests ($v)"
  timeout 150 tools/mkrun -n 2 --timeout 140 env LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-} MK_SHARE_GPUS=1 \
    MK_TIMEOUT_MS=20000 $bin --gtest_filter='RingAttnDist*:AgGemmTest.FinishesWithTwoSmsFree' > $R/scarce_$v.log 2>&1
  el "rc=$?"; grep -E "^\[  (PASSED|FAILED) |not complete|differing|timed out" $R/scarce_$v.log | sort | uniq -c | head
done
el "mk_gpu_tests (patched)"
timeout 150 build/bin/mk_gpu_tests > $R/gpu_tests.log 2>&1; el "rc=$?"
grep -E "^\[  (PASSED|FAILED) |Failure" $R/gpu_tests.log | head -5
el "AgGemm dist tests 1x2, time-sliced (patched)"
timeout 150 tools/mkrun -n 2 --timeout 140 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
  --gtest_filter='AgGemm*' > $R/tp_tests.log 2>&1; el "rc=$?"
grep -E "^\[  (PASSED|FAILED) " $R/tp_tests.log | sort | uniq -c | head -6
export MK_LIBRARY=$PWD/build/lib/libmkernel.so
for t in "1x2:2:60000:dist_ring_attn_check" "2x1:1:60000:dist_ring_attn_check" "timeout:2:1000:dist_ring_attn_timeout"; do
  IFS=: read name rpn tmo script <<< "$t"
  el "ring $name ($script, patched)"
  MK_RANKS_PER_NODE=$rpn MK_SHARE_GPUS=1 MK_TIMEOUT_MS=$tmo timeout 150 torchrun --standalone --nproc_per_node=2 \
    tests/python/gpu/$script.py > $R/ring_$name.log 2>&1; el "rc=$?"; tail -2 $R/ring_$name.log
done
for i in 1; do  # one alternation (a second if time allows: the call is bounded at 600 s)
  for L in main patched; do
    lib=$PWD/build/lib; [ $L = main ] && lib=$PWD/.carry/lib_main
    el "ring_engine_1gpu $L run $i"
    MK_LIBRARY=$lib/libmkernel.so timeout 60 python3 bench/ring_engine_1gpu.py --quick --rounds 8 --out $R/eng_$L-$i 2>&1 |
      tail -10
  done
done
