# call H' (session 57): the shortened form of h_lifetime.sh for a small budget: the plan-lifetime and copy-free
# tests and what their change touches most (mk_gpu_tests whole; the dist tier's symmetric, AgGemm and GemmAr tests
# as 1x2 sharing the GPU; pytest tests/python/gpu), then the two ordering tests against the old launch order's
# library (build-sim/: they must fail there; not counted). Carries build/bin build/lib build-sim.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
step_s=100 run build/bin/mk_gpu_tests
step_s=120 run tools/mkrun -n 2 --timeout 110 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='Dist.*:AgGemm*:GemmAr*'
step_s=90 run "${e[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
sim_fail=$fail
step_s=40 run build-sim/bin/mk_gpu_tests --gtest_filter='*TwoCallsCaptured*'
step_s=40 run tools/mkrun -n 2 --timeout 35 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 build-sim/bin/mk_dist_tests \
    --gtest_filter='*TwoPlans*'
fail=$sim_fail
echo "fail=$fail"
exit $fail
