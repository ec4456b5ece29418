# call D (session 44): the attention benches against fp32 (bench/attn_ref.py) on one GPU: attention_bench.py
# --quick (every row's out and lse against the blocked fp32 reference), then the ring bench at world 1 (its
# check shape's LSE and the sampled check at every timed shape): mkernel only, then every variant. Carries
# build/bin build/lib.
mkdir -p $OUT/d
source tools/gpu_env.sh
export PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so
timeout --foreground 200 python3 bench/attention_bench.py --quick --out $OUT/d/res > $OUT/d/attention.log 2>&1
echo "attention rc=$?"; tail -6 $OUT/d/attention.log | cut -c1-400
timeout --foreground 150 torchrun --standalone --nproc_per_node=1 bench/torch_ring_attn_bench.py --quick --rounds 5 \
  --warmup 1 --only mkernel --out $OUT/d/res > $OUT/d/ring_mk.log 2>&1
echo "ring mkernel-only rc=$?"; grep -h "check\|^| 1x1\|Error\|error" $OUT/d/ring_mk.log | cut -c1-400 | head -12
timeout --foreground 180 torchrun --standalone --nproc_per_node=1 bench/torch_ring_attn_bench.py --quick --rounds 5 \
  --warmup 1 --out $OUT/d/res > $OUT/d/ring_all.log 2>&1
echo "ring all rc=$?"; grep -h "check\|^| 1x1\|Error\|error" $OUT/d/ring_all.log | cut -c1-400 | head -12
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
