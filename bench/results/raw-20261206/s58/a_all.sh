# call A (session 58): session 57's owed run (h_lifetime.sh: mk_gpu_tests whole, now with
# RingPlanLifetime.*; the TP/ring/symmetric dist tests at 1x2 sharing the GPU and 2x1 emu; the failed-teardown
# scenario; pytest tests/python/gpu; dist_tp_check and dist_ring_attn_check at 2 ranks), then the GEMM's
# peer-reduction tests (GemmPeer.*: the epilogue's red.add now at system scope) at 1x2 and 2x1 emu.
# Carries build/bin build/lib.
set -u
bash bench/results/raw-20261206/s57/h_lifetime.sh
f1=$?
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=90 run tools/mkrun -n 2 --timeout 80 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='GemmPeer.*'
step_s=90 run tools/mkrun -n 2 --timeout 80 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter='GemmPeer.*'
echo "h_lifetime fail=$f1 peer fail=$fail"
exit $(( f1 || fail ))
