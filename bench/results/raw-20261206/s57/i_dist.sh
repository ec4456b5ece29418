# calls I and J (session 57), inline commands as run (from this file's lines): the dist tier's TP and ring tests
# with the plans' new destructors (6ab455a), as 1x2 sharing one GPU plus the failed-teardown scenario (call I),
# then as 2x1 emu (call J). Carries build/bin build/lib.
source tools/gpu_env.sh; source tools/gpu_steps.sh; f='AgGemm*:GemmRs*:GemmAr*:RingAttn*'
# call I
step_s=100 run tools/mkrun -n 2 --timeout 90 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter="$f"
step_s=60 run tools/mkrun -n 2 --timeout 50 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --failed-teardown-scenario
# call J
step_s=100 run tools/mkrun -n 2 --timeout 90 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter="$f"
echo "fail=$fail"
