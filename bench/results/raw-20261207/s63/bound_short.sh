# Session 63, call E (short form, after a failed start left 497 s): the C ABI allgather test on one rank, then
# dist_tp_check.py (which now checks that the bound closes a captured plan whose graph is gone on every rank) with
# 2 ranks sharing the GPU (1x2) and 4 ranks sharing it. Bounded; ~2 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
run build/bin/mk_gpu_tests --gtest_filter='CApiGpu.*'
env_=(env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000)
tr=(python3 -m torch.distributed.run --standalone)
step_s=100 run "${env_[@]}" "${tr[@]}" --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
# (2x1 emu left out: the budget after three failed starts)
step_s=120 run "${env_[@]}" "${tr[@]}" --nproc_per_node=4 tests/python/gpu/dist_tp_check.py
echo "fail=$fail"
