# call F (session 45): torch_tp_bench.py at world 1 (never run at 1 rank before): the default (host sync + barrier
# + GPU spin before each call) and --back-to-back (a 1-element NCCL all-reduce on the stream before each call, no
# host sync inside the rounds), --quick (M = 4096), with the clock line (no power figure since fe86fc5); then
# mkbench --quick gemm on one rank for the C++ line. PyTorch's symmetric-memory ops at one rank may be
# unavailable (the report says why). Carries build/bin build/lib.
mkdir -p $OUT/f
source tools/gpu_env.sh
export PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so
for mode in rested back; do
  flag=; [ $mode = back ] && flag=--back-to-back
  timeout --foreground 150 torchrun --standalone --nproc_per_node=1 bench/torch_tp_bench.py --quick --rounds 20 \
    --warmup 3 $flag --out $OUT/f/res_$mode > $OUT/f/tp_$mode.log 2>&1
  echo "torch_tp_bench $mode rc=$?"; grep -h "^| 1x1\|timing\|GPU clocks\|rror" $OUT/f/res_$mode/torch-tp-*.md | cut -c1-260
done
MK_BENCH_OUT=$OUT/f/res_mk timeout --foreground 100 build/bin/mkbench --quick gemm > $OUT/f/gemm.log 2>&1
echo "mkbench gemm rc=$?"; grep -h "GPU while" $OUT/f/gemm.log | sed "s/.*GPU while/GPU while/" | cut -c1-260
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
