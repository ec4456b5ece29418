# call D (session 56): the runtime audit's changes on one GPU. (1) the failed-teardown scenario, now with the failed
# rank keeping its communicator 12 s after its release (its release aborts the bootstrap: the healthy rank's own
# release must not wait for it); (2) the dist tier's symmetric-memory and op tests as 1x2 sharing the GPU (VMM handles
# pass through the fd exchange, whose failure notice is new); (3) mk_gpu_tests. Carries build/bin build/lib.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=60 run tools/mkrun -n 2 --timeout 50 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --failed-teardown-scenario
step_s=240 run tools/mkrun -n 2 --timeout 230 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='AgGemm*:GemmRs*:GemmAr*:GemmPeer*:Dist.Topology*:Dist.Symmetric*:Dist.Mismatched*:Net.Puts*'
step_s=70 run build/bin/mk_gpu_tests
echo "fail=$fail"
exit $fail
