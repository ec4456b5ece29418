# Owed GPU call (written in session 59, which had no device time: 164 s left of the budget, no machine started).
# Session 58's call D (b_after.sh: mk_gpu_tests whole, with session 59's TpPlanSignals.AMalformedReuseKeepsTheWords-
# SayingSo and the AttnWorkspace / RawPointers fixes; the TP dist tests at 1x2 sharing the GPU; pytest
# tests/python/gpu, with the current-stream checks; mk_cpu_tests' DeviceHealth.*), then gpu_test.sh's new one-GPU
# steps (IPC symmetric memory, the abort scenario, with the ranks sharing the GPU). Carries build/bin build/lib.
# ~4 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=400 run bash bench/results/raw-20261206/s58/b_after.sh
step_s=120 run tools/mkrun -n 2 --timeout 110 env MK_SYMM_MODE=ipc MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter='Dist.Symmetric*:Dist.Mismatched*:AgGemm*:GemmRs*'
step_s=60 run tools/mkrun -n 2 --timeout 50 env MK_TIMEOUT_MS=500 MK_SHARE_GPUS=1 build/bin/mk_dist_tests \
    --abort-scenario
echo "fail=$fail"
exit $fail
