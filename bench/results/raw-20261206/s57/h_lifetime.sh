# call H (session 57): plans outliving their communicator (released with it: TpPlanLifetime.*), a copy of a
# symmetric buffer freed (Dist.ACopyOfASymmetricBufferFreesIt), with everything the plan teardown change touches:
# mk_gpu_tests whole; the dist tier's TP, ring and symmetric tests as 1x2 sharing the GPU and the TP/ring ones as
# 2x1 emu; the failed-teardown scenario; pytest tests/python/gpu; dist_tp_check and dist_ring_attn_check at 2
# ranks. Carries build/bin build/lib. (Call H' ran the ordering tests against the old launch order; the Dist.*
# filter below leaves out the 100k ping-pong, which takes minutes on one time-sliced GPU.)
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
tr=(python3 -m torch.distributed.run --standalone)
f='AgGemm*:GemmRs*:GemmAr*:RingAttn*'
step_s=120 run build/bin/mk_gpu_tests
step_s=150 run tools/mkrun -n 2 --timeout 140 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter="$f:Dist.Topology*:Dist.Symmetric*:Dist.Mismatched*:Dist.ACopyOf*:Dist.Signals*"
step_s=120 run tools/mkrun -n 2 --timeout 110 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter="$f"
step_s=60 run tools/mkrun -n 2 --timeout 50 env MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --failed-teardown-scenario
step_s=90 run "${e[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
step_s=80 run "${e[@]}" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
step_s=80 run "${e[@]}" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${tr[@]}" --nproc_per_node=2 \
    tests/python/gpu/dist_ring_attn_check.py
echo "fail=$fail"
exit $fail
