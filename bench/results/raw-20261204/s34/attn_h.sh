# call H (session 34): the attention engine's q_empty released by every consumer warp (8 arrivals, was one per
# warpgroup: racecheck's ring-kernel reports of call G). New library in build/lib (working tree on 87461ac), the
# old one (87461ac) in .carry/lib_x. Correctness: the attention GPU tests, the ring kernel's dist test plain and
# under racecheck (1x2, ranks sharing the GPU), dist_ring_attn_check.py on 2 ranks; speed: attention_bench.py
# --quick and ring_engine_1gpu.py --quick, old and new alternated, twice. Carries build/bin build/lib .carry/rdma .carry/lib_x.
mkdir -p $OUT/h
source tools/gpu_env.sh; source tools/gpu_steps.sh
export PYTHONPATH=$PWD/python
NEW=$PWD/build/lib/libmkernel.so OLD=$PWD/.carry/lib_x/libmkernel.so
MK_LIBRARY=$NEW timeout 120 python3 -m pytest -q -p no:cacheprovider tests/python/gpu/test_attention_gpu.py > $OUT/h/attn_tests.log 2>&1
echo "attention tests rc=$?"; tail -2 $OUT/h/attn_tests.log
timeout 100 tools/mkrun -n 2 --timeout 90 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter='RingAttn*' > $OUT/h/ring_dist.log 2>&1
echo "RingAttn* 1x2 rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/h/ring_dist.log | sort | uniq -c
SANITIZE_STEP_S=100 SANITIZE_DIST_FILTER='RingAttn*' tools/sanitize_gpu.sh racecheck $OUT/h/san dist
MK_LIBRARY=$NEW MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 120 torchrun --standalone --nproc_per_node=2 \
  tests/python/gpu/dist_ring_attn_check.py > $OUT/h/ring_check.log 2>&1
echo "dist_ring_attn_check rc=$?"; tail -3 $OUT/h/ring_check.log
for r in 1 2; do
  for v in old new; do
    lib=$OLD; [ $v = new ] && lib=$NEW
    mkdir -p $OUT/h/$v$r
    MK_LIBRARY=$lib timeout 100 python3 bench/attention_bench.py --quick --out $OUT/h/$v$r > $OUT/h/attn_$v$r.log 2>&1
    echo "attention_bench $v r$r rc=$?"; grep -E "^\|" $OUT/h/attn_$v$r.log | tail -10
    MK_LIBRARY=$lib timeout 100 python3 bench/ring_engine_1gpu.py --quick --out $OUT/h/$v$r > $OUT/h/ring1_$v$r.log 2>&1
    echo "ring_engine_1gpu $v r$r rc=$?"; grep -E "^\|" $OUT/h/ring1_$v$r.log | tail -8
  done
done
tar czf $OUT/h-out.tgz -C $OUT h; rm -rf $OUT/h
