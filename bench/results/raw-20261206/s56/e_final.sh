# call E (session 56): the last commits on one GPU: mk_gpu_spin (CApiGpu.GpuSpinWaitsItsCyclesAtTheTopClockAsTime in
# mk_gpu_tests; mkbench --lead-cycles and the torchrun benches' lead now call it); mkbench's NCCL table (inputs
# filled last to first); pytest tests/python/gpu; torch_tp_bench --quick --ops rs at one rank (its lead).
# Carries build/bin build/lib.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
step_s=70 run build/bin/mk_gpu_tests --gtest_filter='CApiGpu.*'
step_s=120 run env MK_BENCH_OUT=$OUT/res build/bin/mkbench --quick --iters 5 --warmup 1 --lead-cycles 2000000 nccl
grep -h "timing\|^| all_reduce\|^| all_gather\|^| reduce_scatter" $OUT/res/*.md | cut -c1-200 | head -6
step_s=90 run "${e[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
step_s=120 run "${e[@]}" python3 -m torch.distributed.run --standalone --nproc_per_node=1 bench/torch_tp_bench.py \
    --quick --ops rs --rounds 5 --warmup 1 --out $OUT/res
grep -h "GPU sleep\|^| 1x1" $OUT/res/torch-tp*.md | cut -c1-240 | head -4
echo "fail=$fail"
exit $fail
