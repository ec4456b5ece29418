# call C (session 29): fabric's retire of a staging shadow (data no kernel waited for is dropped at deregistration).
# Carries build/bin build/lib .carry/rdma .carry/mutant (libmkernel.so built with the cut disabled: the old behaviour).
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fab="MK_RANKS_PER_NODE=1 MK_NET=fabric MK_FI_PROVIDER=tcp;ofi_rxm MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
step_s=100
run tools/mkrun -n 2 --timeout 90 env $fab build/bin/mk_dist_tests --gtest_filter='Net.Deregistering*' --gtest_repeat=3 > $OUT/c/dereg_main.log 2>&1
run tools/mkrun -n 2 --timeout 90 env $fab LD_LIBRARY_PATH=$PWD/.carry/mutant/lib:$LD_LIBRARY_PATH build/bin/mk_dist_tests --gtest_filter='Net.Deregistering*' > $OUT/c/dereg_mutant.log 2>&1
run tools/mkrun -n 2 --timeout 90 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='Net.Deregistering*' > $OUT/c/dereg_emu.log 2>&1
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh fabric > $OUT/c/gpu_test_fabric.log 2>&1
grep -h '^=== [PFS]' $OUT/c/gpu_test_fabric.log
for f in $OUT/c/dereg_*.log; do echo "--- $f"; grep -E "OK \]|FAILED|SKIPPED|Failure|dropped|kept until|reached|applied|network:" $f | head -20; done
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
