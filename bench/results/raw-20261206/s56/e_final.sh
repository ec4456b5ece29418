# call E (session 56): the last commits on one GPU: mkbench's NCCL table (inputs filled last to first) and
# --lead-cycles' new wording, at one rank; pytest tests/python/gpu and dist_ring_attn_check (2 ranks sharing the GPU)
# with the Mismatch subclasses as module attributes. Carries build/bin build/lib.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
e=(env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so)
step_s=120 run env MK_BENCH_OUT=$OUT/res build/bin/mkbench --quick --iters 5 --warmup 1 --lead-cycles 2000000 nccl
grep -h "timing\|^| all_reduce\|^| all_gather\|^| reduce_scatter" $OUT/res/*.md | cut -c1-200 | head -6
step_s=90 run "${e[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
step_s=80 run "${e[@]}" MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 python3 -m torch.distributed.run --standalone \
    --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
echo "fail=$fail"
exit $fail
