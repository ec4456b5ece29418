#!/usr/bin/env bash
# 1 GPU (~4 min): the ring kernel at 176-key blocks with the block iterator and a push copy loop of one load
# in flight per thread (lib_e5 = build/lib) against main (lib_main, 144): ring_engine_1gpu alternating, then
# the candidate's correctness: mk_gpu_tests, the Python attention tests, the ring checks on 1 rank, 1x2, 2x1
# emu and 2x2 (ranks sharing the GPU), and the timeout check.
source tools/gpu_env.sh
export LD_LIBRARY_PATH=$PWD/.carry/rdma:$LD_LIBRARY_PATH PYTHONPATH=$PWD/python
R=$OUT/c4; mkdir -p $R
for L in main e5 main e5; do
  echo "=== lib_$L"
  MK_LIBRARY=$PWD/.carry/lib_$L/libmkernel.so timeout 100 python3 bench/ring_engine_1gpu.py --quick --rounds 8 \
    --out $R/lib_$L 2>&1 | grep -E "^B=|wrote"
done
timeout 120 build/bin/mk_gpu_tests > $R/gpu_tests.log 2>&1; echo "mk_gpu_tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" $R/gpu_tests.log | head -5
export MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/gpu -k "attention or attn" > $R/pytest_attn.log 2>&1; echo "pytest rc=$?"; tail -1 $R/pytest_attn.log
timeout 100 torchrun --standalone --nproc_per_node=1 tests/python/gpu/dist_ring_attn_check.py > $R/ring_1.log 2>&1; echo "ring 1 rank rc=$?"; tail -1 $R/ring_1.log
for t in "1x2:2:2" "2x1:1:2" "2x2:2:4"; do IFS=: read name rpn np <<< "$t"
  MK_RANKS_PER_NODE=$rpn MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 150 torchrun --standalone --nproc_per_node=$np \
    tests/python/gpu/dist_ring_attn_check.py > $R/ring_$name.log 2>&1; echo "ring $name rc=$?"; tail -1 $R/ring_$name.log
done
MK_SHARE_GPUS=1 MK_TIMEOUT_MS=1000 timeout 100 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_timeout.py \
  > $R/ring_timeout.log 2>&1; echo "ring timeout rc=$?"; tail -2 $R/ring_timeout.log
tar czf $OUT/c4.tgz -C $OUT c4 && rm -rf $R
