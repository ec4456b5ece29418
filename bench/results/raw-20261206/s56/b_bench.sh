# call B (session 56): the benchmarks' changes on one GPU (correctness of the scripts, no timing meaning):
# mkbench --lead-cycles with the spin on %globaltimer, its report's mk_environment line; the NCCL table's
# rotation; torch_ring_attn_bench at world 1 (fresh inputs for the sampled check, sample_rows, the MK_* line);
# torch_tp_bench at world 1 (check_after on every run). Carries build/bin build/lib.
mkdir -p $OUT/b
source tools/gpu_env.sh
export PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so
MK_BENCH_OUT=$OUT/b/res MK_SIGNAL_REUSE=1 timeout --foreground 120 build/bin/mkbench --quick --iters 5 --warmup 1 \
  --lead-cycles 2000000 gemm_rs nccl > $OUT/b/mkb.log 2>&1
echo "mkbench rc=$?"; grep -h "mk_environment\|rror\|check" $OUT/b/mkb.log $OUT/b/res/*.md 2>/dev/null | cut -c1-200 | head -8
timeout --foreground 200 torchrun --standalone --nproc_per_node=1 bench/torch_ring_attn_bench.py --quick --rounds 5 \
  --warmup 1 --out $OUT/b/res > $OUT/b/ring.log 2>&1
echo "ring world 1 rc=$?"; grep -h "check\|^| 1x1\|rror\|MK_\* set" $OUT/b/ring.log $OUT/b/res/torch-ring*.md | cut -c1-300 | head -14
timeout --foreground 150 torchrun --standalone --nproc_per_node=1 bench/torch_tp_bench.py --quick --rounds 5 \
  --warmup 1 --out $OUT/b/res > $OUT/b/tp.log 2>&1
echo "tp world 1 rc=$?"; grep -h "rror\|disagree\|^| 1x1\|MK_\* set" $OUT/b/tp.log $OUT/b/res/torch-tp*.md | cut -c1-300 | head -14
cd $OUT && tar czf b.tgz b && rm -rf b
