# call D (session 55): the C ABI's handle kinds and function-named errors (a5daa68, and the commit after it) and
# attention_workspace_bytes' shape checks (dd07f1a) on a GPU: every Python GPU test goes through the C ABI, as do
# torchrun dist_tp_check.py's plans; mk_gpu_tests for the C++ side. Carries build/bin build/lib.
source tools/gpu_env.sh; source tools/gpu_steps.sh
lib=MK_LIBRARY=$PWD/build/lib/libmkernel.so
step_s=60 run build/bin/mk_gpu_tests
step_s=80 run env PYTHONPATH=$PWD/python $lib python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
step_s=70 run env PYTHONPATH=$PWD/python $lib MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 python3 -m torch.distributed.run \
    --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
exit $fail
