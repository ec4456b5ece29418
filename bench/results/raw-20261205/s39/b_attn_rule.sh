# call B (session 39): the claimed units' head-group rule after call A (tile-major where all K/V fits in 3/4
# of L2, else the largest dividing group within 1/4). Carries build/bin build/lib.
# 1. tests/python/gpu/test_attention_gpu.py; 2. the causal shapes twice, the defaults against SDPA and,
# side by side, static units (before e398a9b), claimed head-major, claimed tile-major.
mkdir -p $OUT/b
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 150 python3 -m pytest -q tests/python/gpu/test_attention_gpu.py > $OUT/b/pytest_attn.log 2>&1
echo "pytest rc=$?"; tail -2 $OUT/b/pytest_attn.log
for run in 1 2; do
  timeout 200 python3 bench/attention_bench.py --causal-only --out $OUT/b --mk-env MK_ATTN_UNITS=static \
    --mk-env MK_ATTN_UNITS=claimed,MK_ATTN_GROUP_HEADS=1 --mk-env MK_ATTN_UNITS=claimed,MK_ATTN_GROUP_HEADS=1000000 \
    > $OUT/b/attention-$run.log 2>&1
  echo "attention_bench $run rc=$?"
done
for f in $OUT/b/attention-2*.md; do grep "^| [14] " $f | awk -F'|' '{print $2,$3,$5,$6,$8,$12,$14,$16,$18,$20,$21,$22,$23,$24,$25}'; done
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
