# Session 65, second call: dist_tp_check.py at 2 ranks sharing the GPU, after its failed capture's "The CUDA Graph is
# empty" warning was filtered (the capture fails on purpose), and the GEMM-hook tests that use the shared Stream
# helper (tests/gpu/cuda_raii.hpp). Carry `build/bin build/lib`. Bounded; ~1 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=120 run env PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
  python3 -m torch.distributed.run --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
step_s=60 run build/bin/mk_gpu_tests --gtest_filter='GemmHooks*:GraphUses.*'
echo "fail=$fail"
