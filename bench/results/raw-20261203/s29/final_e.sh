# call E (session 29): HEAD 33e49ad (emu_ring.hpp's cut counters on emu's path; stall levels; the retire): the compiled tier
# and the fabric part of tools/gpu_test.sh, and the deregistration test x5. Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/e
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled fabric > $OUT/e/gpu_test.log 2>&1
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
step_s=100
run tools/mkrun -n 2 --timeout 90 env MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter='Net.Deregistering*' --gtest_repeat=5 > $OUT/e/dereg.log 2>&1
grep -h '^=== [PFS]' $OUT/e/gpu_test.log
grep -E "OK \]|FAILED|dropped" $OUT/e/dereg.log | sort | uniq -c | head
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
