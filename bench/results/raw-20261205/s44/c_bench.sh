# call C (session 44): session 43's benchmark changes on one GPU (TFLOP/s and config columns, meta with the NCCL
# version; attention_bench's driver/cuDNN record): mkbench --quick of the one-GPU benchmarks, then
# bench/attention_bench.py --quick. Carries build/bin build/lib.
mkdir -p $OUT/c
source tools/gpu_env.sh
export MK_BENCH_OUT=$OUT/c/results
timeout --foreground 280 build/bin/mkbench --quick gemm_cublas gemm gemm_owner gemm_rs net_post api_block \
  > $OUT/c/mkbench.log 2>&1; echo "mkbench rc=$?"
tail -5 $OUT/c/mkbench.log
PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so timeout --foreground 200 python3 bench/attention_bench.py --quick \
  --out $OUT/c/results > $OUT/c/attention.log 2>&1; echo "attention rc=$?"
tail -5 $OUT/c/attention.log
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
