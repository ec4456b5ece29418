# call A (session 46): the Python per-round columns (best baseline / mkernel round by round, p10/median/p90) and the
# regime config names, never run on a GPU: torch_tp_bench.py at world 1 rested and --back-to-back (--quick), the ring
# bench at world 1 (--quick), mkbench --lead-cycles (the "rested" config) on 1x2 sharing the GPU (correctness run),
# and the NVML clock line. Then tools/issue_targets.py over the call's reports (it must leave the shared-GPU and 1x1
# reports out). Carries build/bin build/lib.
mkdir -p $OUT/a
source tools/gpu_env.sh
export PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so
for mode in rested back; do
  flag=; [ $mode = back ] && flag=--back-to-back
  timeout --foreground 150 torchrun --standalone --nproc_per_node=1 bench/torch_tp_bench.py --quick --rounds 10 \
    --warmup 2 $flag --out $OUT/a/res_$mode > $OUT/a/tp_$mode.log 2>&1
  echo "torch_tp_bench $mode rc=$?"; grep -h "^| \|timing\|GPU clocks\|config\|rror" $OUT/a/res_$mode/torch-tp-*.md | cut -c1-300
done
timeout --foreground 150 torchrun --standalone --nproc_per_node=1 bench/torch_ring_attn_bench.py --quick --rounds 5 \
  --warmup 1 --out $OUT/a/res_ring > $OUT/a/ring.log 2>&1
echo "ring rc=$?"; grep -h "^| \|config\|clock\|rror" $OUT/a/res_ring/*.md | cut -c1-300
MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_BENCH_OUT=$OUT/a/res_mk timeout --foreground 120 tools/mkrun -n 2 --timeout 110 \
  build/bin/mkbench --quick --iters 5 --warmup 1 --lead-cycles 2000000 gemm_rs > $OUT/a/mk_rested.log 2>&1
echo "mkbench rested rc=$?"; grep -h "config\|^| 4096\|GPU while" $OUT/a/res_mk/*.md | cut -c1-300
python3 tools/issue_targets.py $OUT/a/res_rested $OUT/a/res_back $OUT/a/res_ring $OUT/a/res_mk > $OUT/a/targets.txt 2>&1
echo "issue_targets rc=$?"; head -40 $OUT/a/targets.txt
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
