#!/usr/bin/env bash
# 1 GPU (~3 minutes; not run): the block iterator carrying kvalid / kpos0 (no per-block indexed constant load) with the ring
# kernel at 176-key blocks (lib_it176 = build/lib) against main (lib_main, 144): ring_engine_1gpu alternating, then
# correctness of the candidate: mk_gpu_tests, the Python attention tests, the ring checks 1x2 and 2x1 emu (shared GPU).
source tools/gpu_env.sh
export LD_LIBRARY_PATH=$PWD/.carry/rdma:$LD_LIBRARY_PATH PYTHONPATH=$PWD/python
R=$OUT/c6; mkdir -p $R
for L in main it176 main it176; do
  echo "=== lib_$L"
  MK_LIBRARY=$PWD/.carry/lib_$L/libmkernel.so timeout 100 python3 bench/ring_engine_1gpu.py --quick --rounds 8 \
    --out $R/lib_$L 2>&1 | grep -E "^B=|wrote"
done
timeout 120 build/bin/mk_gpu_tests > $R/gpu_tests.log 2>&1; echo "mk_gpu_tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure" $R/gpu_tests.log | head -5
export MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/gpu -k "attention or attn" > $R/pytest_attn.log 2>&1; echo "pytest rc=$?"; tail -1 $R/pytest_attn.log
for t in "1x2:2" "2x1:1"; do IFS=: read name rpn <<< "$t"
  MK_RANKS_PER_NODE=$rpn MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 100 torchrun --standalone --nproc_per_node=2 \
    tests/python/gpu/dist_ring_attn_check.py > $R/ring_$name.log 2>&1; echo "ring $name rc=$?"; tail -1 $R/ring_$name.log
done
tar czf $OUT/c6.tgz -C $OUT c6 && rm -rf $R
