# call H (session 44): 495c112's review mends on one GPU: attention_bench.py --quick with the fp64 reference,
# the ring bench at world 1 (the sampled check in three agreed steps), mkbench's shared-GPU detection by GPU UUID
# (2 ranks sharing the GPU, --quick TP benchmarks). Carries build/bin build/lib.
mkdir -p $OUT/h
source tools/gpu_env.sh
export PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so
timeout --foreground 150 python3 bench/attention_bench.py --quick --out $OUT/h/res > $OUT/h/attention.log 2>&1
echo "attention rc=$?"; grep -h "err=" $OUT/h/attention.log | cut -c1-120
timeout --foreground 150 torchrun --standalone --nproc_per_node=1 bench/torch_ring_attn_bench.py --quick --rounds 5 \
  --warmup 1 --out $OUT/h/res > $OUT/h/ring_all.log 2>&1
echo "ring rc=$?"; grep -h "^| 1x1" $OUT/h/ring_all.log | head -4 | awk -F'|' '{print $(NF-1)}'
MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_BENCH_OUT=$OUT/h/res timeout --foreground 150 tools/mkrun -n 2 --timeout 140 \
  build/bin/mkbench --quick --iters 3 --warmup 1 ag_gemm gemm_rs gemm_ar > $OUT/h/shared_1x2.log 2>&1
echo "shared 1x2 rc=$?"; grep -h "results written\|failed" $OUT/h/shared_1x2.log | head -3
tar czf $OUT/h-out.tgz -C $OUT h; rm -rf $OUT/h
