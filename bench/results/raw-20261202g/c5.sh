#!/usr/bin/env bash
# 1 GPU: the landed ring change (699fa21) beyond c4: the one-GPU attention op (block iterator) against main at
# S = 8k, D 64 and 128; the ring example and the ring trace with 2 ranks sharing the GPU; the whole Python GPU tier.
source tools/gpu_env.sh
export LD_LIBRARY_PATH=$PWD/.carry/rdma:$LD_LIBRARY_PATH PYTHONPATH=$PWD/python
R=$OUT/c5; mkdir -p $R
for L in main e5 main e5; do
  echo "=== lib_$L"
  MK_LIBRARY=$PWD/.carry/lib_$L/libmkernel.so timeout 120 python3 bench/attention_bench.py --quick --rounds 10 \
    --out $R/lib_$L 2>&1 | grep -E "mkernel|wrote" | head -12
done
export MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/gpu > $R/pytest.log 2>&1; echo "pytest rc=$?"; tail -1 $R/pytest.log
MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 120 torchrun --standalone --nproc_per_node=2 examples/ring_attention.py \
  > $R/example.log 2>&1; echo "example rc=$?"; tail -2 $R/example.log
MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 120 torchrun --standalone --nproc_per_node=2 tools/ring_trace.py --seq 2048 \
  > $R/trace.log 2>&1; echo "trace rc=$?"; tail -5 $R/trace.log
tar czf $OUT/c5.tgz -C $OUT c5 && rm -rf $R
