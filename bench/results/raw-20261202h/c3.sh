#!/usr/bin/env bash
# 1 GPU: GemmAr's owner-final tiles published under the next tile's MMAs (one node) — correctness with ranks sharing
# the GPU (1x2, 1x4: the new path; 2x1, 2x2: the epilogue path), then speed at W = 1 against main (.carry/lib_main),
# mkbench gemm_rs one rank, alternating; stops past 520 s.
source tools/gpu_env.sh
R=$OUT/c3; mkdir -p $R; T0=$(date +%s)
step() { local t0=$(date +%s); "$@" > $R/step.$t0.log 2>&1; local rc=$?; echo "rc=$rc $(( $(date +%s) - t0 )) s: $*" | cut -c1-200; tail -3 $R/step.$t0.log | cut -c1-200; }
step timeout 150 build/bin/mk_gpu_tests --gtest_filter='TpSingleRank*:Gemm*'
F=--gtest_filter='GemmAr*'
step tools/mkrun -n 2 --timeout 120 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests $F
step tools/mkrun -n 2 --timeout 120 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests $F
step tools/mkrun -n 4 --timeout 150 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=4 build/bin/mk_dist_tests $F
step tools/mkrun -n 4 --timeout 150 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=2 build/bin/mk_dist_tests $F
step env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
  timeout 150 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
for v in main new main new; do
  [ $(( $(date +%s) - T0 )) -gt 470 ] && break
  lib=$PWD/.carry/lib_$v; t0=$(date +%s)
  timeout 100 tools/mkrun -n 1 --timeout 95 env LD_LIBRARY_PATH=$lib build/bin/mkbench --out $R/b_$v gemm_rs \
    > $R/rs_$v.$t0.log 2>&1
  echo "=== $v rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "^\| +[0-9]+ \|" $R/rs_$v.$t0.log | grep -E " cuBLAS | GemmRs \(heur| GemmAr \(heur" | sed 's/  */ /g'
done
tar czf $OUT/c3.tgz -C $OUT c3 && rm -rf $R
