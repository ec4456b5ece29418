# call C (session 48), the least that covers this session's GPU-side changes when too little budget is left for
# A and B: the one-GPU tier, the dist tier as 2x1 emu (all of it) and 1x2 (TP and ring tests) with the ranks sharing
# the GPU, the Python GPU tests, dist_tp_check (a 0-row a_local on rank 1 alone), and mkbench --quick's TP checks at
# 1x2 sharing the GPU (the host reference collective, the after-timing check). Carries build/bin build/lib.
# C_LITE=1 leaves out the 2x1 dist tier and the Python GPU tests (a smaller budget).
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
sh="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
py="PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so"
{
  step_s=40 run build/bin/mk_gpu_tests
  [ "${C_LITE:-0}" = 1 ] || step_s=70 run tools/mkrun -n 2 --timeout 65 env $sh MK_RANKS_PER_NODE=1 \
      build/bin/mk_dist_tests
  step_s=40 run tools/mkrun -n 2 --timeout 35 env $sh build/bin/mk_dist_tests \
      --gtest_filter='AgGemm*:GemmRs*:GemmAr*:RingAttn*'
  [ "${C_LITE:-0}" = 1 ] || step_s=50 run env $py python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
  step_s=60 run env $py $sh torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
  step_s=90 run env $sh MK_BENCH_OUT=$OUT/c/bench tools/mkrun -n 2 --timeout 85 build/bin/mkbench --quick \
      ag_gemm gemm_rs gemm_ar
} > $OUT/c/c.log 2>&1
grep -h '^=== [PFS]' $OUT/c/c.log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|passed\|failed" $OUT/c/c.log | cut -c1-300 | head -20
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
