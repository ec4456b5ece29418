# Owed GPU call (written in session 59, which had no device time: 164 s left of the budget, no machine started).
# Session 58's call D (bench/results/raw-20261206/s58/b_after.sh) plus session 59's test changes: mk_gpu_tests whole
# (TpPlanSignals.AMalformedReuseKeepsTheWordsSayingSo; AttnWorkspace's per-replay poison; RawPointers' both
# groups), the TP dist tests at 1x2 sharing the GPU, pytest tests/python/gpu (the current-stream checks),
# mk_cpu_tests' DeviceHealth.*, and gpu_test.sh's new one-GPU steps (IPC symmetric memory, the abort scenario, with
# the ranks sharing the GPU). Carries build/bin build/lib. ~4 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
step_s=120 run build/bin/mk_gpu_tests
step_s=120 run tools/mkrun -n 2 --timeout 110 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='AgGemm*:GemmRs*:GemmAr*'
step_s=120 run tools/mkrun -n 2 --timeout 110 env MK_SYMM_MODE=ipc MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter='Dist.Symmetric*:Dist.Mismatched*:AgGemm*:GemmRs*'
step_s=60 run tools/mkrun -n 2 --timeout 50 env MK_TIMEOUT_MS=500 MK_SHARE_GPUS=1 build/bin/mk_dist_tests \
    --abort-scenario
step_s=90 run "${e[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
step_s=30 run build/bin/mk_cpu_tests --gtest_filter='DeviceHealth.*'
echo "fail=$fail"
exit $fail
