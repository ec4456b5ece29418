# call B (session 30): 11a085f (plans give their signal words back, zeroed, reused first fit): the compiled tier of
# tools/gpu_test.sh (every dist test now makes plans on released words), the new tests alone, and the negative
# control: .carry/nozero/libmkernel.so = 11a085f with release_signals not zeroing the words.
# Carries build/bin build/lib .carry/rdma .carry/nozero.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled > $OUT/b/gpu_test.log 2>&1
grep -h '^=== [PFS]' $OUT/b/gpu_test.log
share="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000"
f='GemmRsTest.APlanOnAClosed*'
step_s=100
run build/bin/mk_gpu_tests --gtest_filter='TpPlanSignals.*' > $OUT/b/gpu_new.log 2>&1
run tools/mkrun -n 2 --timeout 90 env $share build/bin/mk_dist_tests --gtest_filter="$f" --gtest_repeat=3 > $OUT/b/new_1x2.log 2>&1
run tools/mkrun -n 2 --timeout 90 env $share MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests --gtest_filter="$f" --gtest_repeat=2 > $OUT/b/new_2x1.log 2>&1
nz="LD_LIBRARY_PATH=$PWD/.carry/nozero"
run tools/mkrun -n 2 --timeout 90 env $share $nz build/bin/mk_dist_tests --gtest_filter="$f" --gtest_repeat=3 > $OUT/b/nozero_1x2.log 2>&1
run tools/mkrun -n 2 --timeout 90 env $share $nz MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests --gtest_filter="$f" > $OUT/b/nozero_2x1.log 2>&1
run tools/mkrun -n 2 --timeout 120 env $share $nz build/bin/mk_dist_tests --gtest_filter='GemmRs*:GemmAr*:AgGemm*' > $OUT/b/nozero_tp_1x2.log 2>&1
for x in $OUT/b/gpu_new.log $OUT/b/new_*.log $OUT/b/nozero_*.log; do echo "--- $x"; grep -E "OK \]|FAILED \]|PASSED|timed out|mismatch|bad elements" $x | sed 's/(.*ms)//' | sort | uniq -c | head -12; done
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
