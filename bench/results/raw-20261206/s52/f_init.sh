# call F (session 52): mkernel.init's id through torch.distributed's store (a15e6fb): the torchrun checks that call
# init (dist_init_check.py; dist_tp_check.py: a second communicator, rank 0's bad knob on every rank), 2 ranks
# sharing the GPU, then the new CPU test where the GPU machine's torch is. Carries build/bin build/lib.
mkdir -p $OUT/f; source tools/gpu_env.sh; source tools/gpu_steps.sh
{
  for script in tests/python/dist_init_check.py tests/python/gpu/dist_tp_check.py; do
    step_s=120 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=60000 torchrun --standalone --nproc_per_node=2 "$script"
  done
  step_s=60 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" python3 -m pytest -q \
      -p no:cacheprovider tests/python/test_torch_id.py
} > $OUT/f/init.log 2>&1
grep -h '^=== [PFS]' $OUT/f/init.log | cut -c1-200; grep -h "passed\|failed\|Error\|rank 0 could" $OUT/f/init.log | head
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
