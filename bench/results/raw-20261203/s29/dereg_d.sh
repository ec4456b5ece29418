# call D (session 29): the final retire (no wait, deferred free, late notes dropped) at 49dae8e.
# Carries build/bin build/lib .carry/rdma .carry/headlib (9663873's libmkernel.so: before any of this, the negative control).
mkdir -p $OUT/d
source tools/gpu_env.sh; source tools/gpu_steps.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fab="MK_RANKS_PER_NODE=1 MK_NET=fabric MK_FI_PROVIDER=tcp;ofi_rxm MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
step_s=100
run tools/mkrun -n 2 --timeout 90 env $fab build/bin/mk_dist_tests --gtest_filter='Net.Deregistering*' --gtest_repeat=5 > $OUT/d/dereg_main.log 2>&1
run tools/mkrun -n 2 --timeout 90 env $fab LD_LIBRARY_PATH=$PWD/.carry/headlib/lib:$LD_LIBRARY_PATH build/bin/mk_dist_tests --gtest_filter='Net.Deregistering*' > $OUT/d/dereg_head.log 2>&1
run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' > $OUT/d/agent.log 2>&1
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh fabric > $OUT/d/gpu_test_fabric.log 2>&1
grep -h '^=== [PFS]' $OUT/d/gpu_test_fabric.log
for f in $OUT/d/dereg_*.log $OUT/d/agent.log; do echo "--- $f"; grep -E "OK \]|FAILED|PASSED|Failure|dropped|kept until|reached|applied|Which is" $f | sort | uniq -c | head -20; done
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
