# call F (session 29): the final HEAD (8932016) over fabric: tools/gpu_test.sh fabric and the deregistration test x3.
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/f
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh fabric > $OUT/f/gpu_test.log 2>&1
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
step_s=100
run tools/mkrun -n 2 --timeout 90 env MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter='Net.Deregistering*' --gtest_repeat=3 > $OUT/f/dereg.log 2>&1
grep -h '^=== [PFS]' $OUT/f/gpu_test.log
grep -E "OK \]|FAILED" $OUT/f/dereg.log | sort | uniq -c | head
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
