# Session 63, call D: the review's mend of the graphs_alive change (the commit after 770a9e37): the new and changed
# tests on one GPU. mk_gpu_tests GraphUses.* and *GraphsAlive* (also under memcheck); the TP dist graph-replay tests
# with 2 ranks sharing the GPU, 1x2 and 2x1 emu; the torchrun checks that changed (ring 1 rank, TP 2 ranks shared).
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
run build/bin/mk_gpu_tests --gtest_filter='GraphUses.*:*GraphsAlive*'
step_s=150 run compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/mk_gpu_tests \
    --gtest_filter='GraphUses.*:*GraphsAlive*'
run tools/mkrun -n 2 --timeout 120 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='*CudaGraphReplay*'
run tools/mkrun -n 2 --timeout 120 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests \
    --gtest_filter='*CudaGraphReplay*'
env_=(env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so")
step_s=100 run "${env_[@]}" python3 -m torch.distributed.run --standalone --nproc_per_node=1 \
    tests/python/gpu/dist_ring_attn_check.py
step_s=100 run "${env_[@]}" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 python3 -m torch.distributed.run --standalone \
    --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
echo "fail=$fail"
