# call A (session 39): the one-GPU attention op's claimed units and head groups (e398a9b) and the shared
# StreamScratch (7de01a2: the standalone GEMM's split tiles now take it). Carries build/bin build/lib.
# 1. mk_gpu_tests (Gemm.* splits through StreamScratch; TpSingleRank; attention failure tests);
# 2. tests/python/gpu/test_attention_gpu.py (every unit distribution against SDPA fp32, two streams at once);
# 3. attention_bench.py: the defaults against SDPA flash / cuDNN and, side by side in the same run, the
#    library's alternatives: static units (the behaviour before e398a9b), claimed head-major, claimed tile-major,
#    and claimed units without a mask.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh; out=$OUT
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
logged 120 a/gpu.log build/bin/mk_gpu_tests
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 150 python3 -m pytest -q tests/python/gpu/test_attention_gpu.py > $OUT/a/pytest_attn.log 2>&1
echo "pytest rc=$?"; tail -5 $OUT/a/pytest_attn.log
timeout 420 python3 bench/attention_bench.py --out $OUT/a --mk-env MK_ATTN_UNITS=static \
  --mk-env MK_ATTN_UNITS=claimed,MK_ATTN_GROUP_HEADS=1 --mk-env MK_ATTN_UNITS=claimed,MK_ATTN_GROUP_HEADS=1000000 \
  --mk-env MK_ATTN_UNITS=claimed > $OUT/a/attention.log 2>&1
echo "attention_bench rc=$?"; tail -40 $OUT/a/attention.log | cut -c1-400
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
