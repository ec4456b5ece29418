# call E (session 44): call D's last step again after its fix (the baselines have an `lse` tensor attribute: the
# check now asks for `last_lse` / `poison_outputs`): the ring bench at world 1, every variant. Carries build/bin build/lib.
mkdir -p $OUT/e
source tools/gpu_env.sh
export PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so
timeout --foreground 180 torchrun --standalone --nproc_per_node=1 bench/torch_ring_attn_bench.py --quick --rounds 5 \
  --warmup 1 --out $OUT/e/res > $OUT/e/ring_all.log 2>&1
echo "ring all rc=$?"; grep -h "check\|^| 1x1\|Error\|error" $OUT/e/ring_all.log | cut -c1-300 | head -14
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
