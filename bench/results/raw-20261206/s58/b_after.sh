# call D (session 58): after a24914e (GEMM dimensions at most 2^31 - 256) and a6f0086 (AgGemm's gathered paths
# refuse a plan whose communicator is gone; TpPlanLifetime extended): mk_gpu_tests whole, the TP dist tests at
# 1x2 sharing the GPU, pytest tests/python/gpu, mk_cpu_tests' DeviceHealth.* (its clearing check needs a
# driver). Not run in session 58 (no device time left). Carries build/bin build/lib.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
step_s=120 run build/bin/mk_gpu_tests
step_s=120 run tools/mkrun -n 2 --timeout 110 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='AgGemm*:GemmRs*:GemmAr*'
step_s=90 run "${e[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
# the CPU test that skips without a driver the part it is named for (the refused call's error cleared)
step_s=30 run build/bin/mk_cpu_tests --gtest_filter='DeviceHealth.*'
echo "fail=$fail"
exit $fail
