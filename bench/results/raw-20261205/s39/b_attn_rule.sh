# call B (session 39): the claimed units' head-group rule after call A (tile-major where all K/V fits in 3/4
# of L2, else the largest dividing group within 1/4) and the review fixes. Carries build/bin build/lib.
# 0. mk_gpu_tests; the ring op's dist tests on 1x2 sharing the GPU (group_heads = 1 replaced head_major);
# 1. tests/python/gpu/test_attention_gpu.py; 2. the causal shapes twice, the defaults against SDPA and,
# side by side, static units (before e398a9b), claimed head-major, claimed tile-major.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh; out=$OUT
logged 90 b/gpu.log build/bin/mk_gpu_tests
logged 120 b/ring-1x2.log tools/mkrun -n 2 --timeout 110 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='RingAttn*'
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 150 python3 -m pytest -q tests/python/gpu/test_attention_gpu.py > $OUT/b/pytest_attn.log 2>&1
echo "pytest rc=$?"; tail -2 $OUT/b/pytest_attn.log
timeout 120 torchrun --standalone --nproc_per_node=1 tests/python/gpu/dist_ring_attn_check.py > $OUT/b/ring_w1.log 2>&1
echo "ring W=1 check rc=$?"; tail -3 $OUT/b/ring_w1.log
for run in 1 2; do
  timeout 200 python3 bench/attention_bench.py --causal-only --out $OUT/b --mk-env MK_ATTN_UNITS=static \
    --mk-env MK_ATTN_UNITS=claimed,MK_ATTN_GROUP_HEADS=1 --mk-env MK_ATTN_UNITS=claimed,MK_ATTN_GROUP_HEADS=1000000 \
    > $OUT/b/attention-$run.log 2>&1
  echo "attention_bench $run rc=$?"
done
for f in $OUT/b/attention-2*.md; do grep "^| [14] " $f | awk -F'|' '{print $2,$3,$5,$6,$8,$12,$14,$16,$18,$20,$21,$22,$23,$24,$25}'; done
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
