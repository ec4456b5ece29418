# call G (session 45): the tree at d55e276 (library built clean there: mk_build_commit) on a GPU: mk_gpu_tests
# (the library relinked with mk_build_commit), the ring bench at world 1 --quick (its report's commit line from the
# library's build), torch_tp_bench.py at world 1 --quick --back-to-back (its check after the timing), and
# mkbench --quick gemm_rs (the clock line without a power figure). Carries build/bin build/lib.
mkdir -p $OUT/g
source tools/gpu_env.sh
timeout --foreground 200 build/bin/mk_gpu_tests > $OUT/g/gpu_tests.log 2>&1
echo "mk_gpu_tests rc=$?"; grep -h "PASSED\|FAILED" $OUT/g/gpu_tests.log | tail -3
export PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so
timeout --foreground 120 torchrun --standalone --nproc_per_node=1 bench/torch_ring_attn_bench.py --quick --rounds 5 \
  --warmup 1 --out $OUT/g/res > $OUT/g/ring.log 2>&1
echo "ring world 1 rc=$?"; grep -h "^- commit\|GPU clocks" $OUT/g/res/torch-ring-attn-*.md | cut -c1-200
timeout --foreground 120 torchrun --standalone --nproc_per_node=1 bench/torch_tp_bench.py --quick --back-to-back \
  --out $OUT/g/res > $OUT/g/tp_back.log 2>&1
echo "torch_tp_bench --back-to-back rc=$?"; grep -h "^- commit\|^| 1x1\|- ops" $OUT/g/res/torch-tp-*.md | cut -c1-200
MK_BENCH_OUT=$OUT/g/res timeout --foreground 100 build/bin/mkbench --quick gemm_rs > $OUT/g/rs.log 2>&1
echo "mkbench gemm_rs rc=$?"; grep -h "commit" $OUT/g/res/mkbench-*.md | head -1
grep -h "GPU while" $OUT/g/rs.log | sed "s/.*GPU while/GPU while/" | cut -c1-250
tar czf $OUT/g-out.tgz -C $OUT g; rm -rf $OUT/g
