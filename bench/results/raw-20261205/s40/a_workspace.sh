# call A (session 40): the caller's workspace for the stateless ops' per-call scratch (GemmArgs / AttentionArgs
# ::workspace; the torch ops pass one from the graph's pool inside CUDA-graph captures). Carries build/bin build/lib.
# 0. mk_gpu_tests (new: Gemm.AWorkspaceSplitsInsideAGraphWithTheEagerBits, AttentionWorkspace.*);
# 1. the torch ops' GPU tests (new: captured GEMM / causal attention give the eager bits; torch.compile
#    reduce-overhead); 2. the causal shapes with --graph: eager and graph-replayed calls, claimed (the defaults,
#    now also in graphs) against MK_ATTN_UNITS=static, beside SDPA; 3. the Python host cost per call.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh; out=$OUT  # (fail=0; logged sets it)
timeout 20 nvidia-smi --query-compute-apps=pid,name --format=csv  # another call's leftovers, if any
logged 110 a/gpu.log build/bin/mk_gpu_tests; tail -3 $OUT/a/gpu.log
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout --foreground -k 5 170 python3 -m pytest -q -rs tests/python/gpu/test_ops_gpu.py tests/python/gpu/test_attention_gpu.py > $OUT/a/pytest.log 2>&1
r=$?; echo "pytest rc=$r"; [ $r -eq 0 ] || fail=1; tail -3 $OUT/a/pytest.log; grep -h "^FAILED\|Error" $OUT/a/pytest.log | head -10
timeout --foreground -k 5 200 python3 bench/attention_bench.py --causal-only --graph --out $OUT/a --mk-env MK_ATTN_UNITS=static \
  > $OUT/a/attention.log 2>&1
r=$?; echo "attention_bench rc=$r"; [ $r -eq 0 ] || fail=1; tail -2 $OUT/a/attention.log
for f in $OUT/a/attention-2*.md; do grep "^| [14] " $f | awk -F'|' '{print $2,$3,$5,$6,$8,$12,$14,$16,$18,$21,$22,$23,$24,$25}'; done
timeout --foreground -k 5 90 torchrun --standalone --nproc_per_node=1 bench/python_overhead.py --out $OUT/a > $OUT/a/python_overhead.log 2>&1
r=$?; echo "python_overhead rc=$r"; [ $r -eq 0 ] || fail=1; grep -h "gemm(a, b\|attention" $OUT/a/python_overhead.log | head -8
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
exit $fail
