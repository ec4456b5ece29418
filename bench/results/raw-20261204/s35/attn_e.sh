# call E (session 35): a __syncwarp after each consumer warp's read of the ring word (attn_engine.cuh), so its lane 0's
# q_empty arrival formally covers every lane's read. New library in build/lib, the old one (3425ed5) in .carry/lib_x.
# Correctness: the attention GPU tests, RingAttn* 1x2, dist_ring_attn_check.py on 2 ranks; speed: attention_bench.py
# --quick and ring_engine_1gpu.py --quick, old and new alternated, once. Carries build/bin build/lib .carry/lib_x.
mkdir -p $OUT/e
source tools/gpu_env.sh; source tools/gpu_steps.sh
export PYTHONPATH=$PWD/python
NEW=$PWD/build/lib/libmkernel.so OLD=$PWD/.carry/lib_x/libmkernel.so
MK_LIBRARY=$NEW timeout 70 python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_attention_gpu.py > $OUT/e/attn_tests.log 2>&1
echo "attention tests rc=$?"; tail -1 $OUT/e/attn_tests.log
timeout 60 tools/mkrun -n 2 --timeout 55 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='RingAttn*' > $OUT/e/ring_dist.log 2>&1
echo "RingAttn* 1x2 rc=$?"; grep -E "^\[  (PASSED|FAILED) " $OUT/e/ring_dist.log | sort | uniq -c
MK_LIBRARY=$NEW MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 60 torchrun --standalone --nproc_per_node=2 \
  tests/python/gpu/dist_ring_attn_check.py > $OUT/e/ring_check.log 2>&1
echo "dist_ring_attn_check rc=$?"; tail -1 $OUT/e/ring_check.log
for v in old new; do
  lib=$OLD; [ $v = new ] && lib=$NEW
  mkdir -p $OUT/e/$v
  MK_LIBRARY=$lib timeout 40 python3 bench/attention_bench.py --quick --out $OUT/e/$v > $OUT/e/attn_$v.log 2>&1
  echo "attention_bench $v rc=$?"; grep -h "mkernel .* ms" $OUT/e/attn_$v.log | cut -c1-200
  MK_LIBRARY=$lib timeout 30 python3 bench/ring_engine_1gpu.py --quick --out $OUT/e/$v > $OUT/e/ring1_$v.log 2>&1
  echo "ring_engine_1gpu $v rc=$?"; grep -h "ms" $OUT/e/ring1_$v.log | tail -4 | cut -c1-200
done
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
