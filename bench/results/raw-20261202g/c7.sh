#!/usr/bin/env bash
# 1 GPU (~2 min): the ring kernel at 176 with the one-load push but WITHOUT the block iterator (the engine's K
# loop as main's; lib_noit = build/lib) against main (144; the landed 699fa21 with the iterator ran in c4);
# then the candidate's correctness: mk_gpu_tests, the ring checks on 1 rank, 1x2 and 2x1 (shared GPU).
source tools/gpu_env.sh
export LD_LIBRARY_PATH=$PWD/.carry/rdma:$LD_LIBRARY_PATH PYTHONPATH=$PWD/python
R=$OUT/c7; mkdir -p $R
for L in main noit main noit; do
  echo "=== lib_$L"
  MK_LIBRARY=$PWD/.carry/lib_$L/libmkernel.so timeout 100 python3 bench/ring_engine_1gpu.py --quick --rounds 8 \
    --out $R/lib_$L 2>&1 | grep -E "^B=|wrote"
done
timeout 120 build/bin/mk_gpu_tests > $R/gpu_tests.log 2>&1; echo "mk_gpu_tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" $R/gpu_tests.log | head -5
export MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 100 torchrun --standalone --nproc_per_node=1 tests/python/gpu/dist_ring_attn_check.py > $R/ring_1.log 2>&1; echo "ring 1 rank rc=$?"; tail -1 $R/ring_1.log
for t in "1x2:2:2" "2x1:1:2"; do IFS=: read name rpn np <<< "$t"
  MK_RANKS_PER_NODE=$rpn MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 150 torchrun --standalone --nproc_per_node=$np \
    tests/python/gpu/dist_ring_attn_check.py > $R/ring_$name.log 2>&1; echo "ring $name rc=$?"; tail -1 $R/ring_$name.log
done
tar czf $OUT/c7.tgz -C $OUT c7 && rm -rf $R
