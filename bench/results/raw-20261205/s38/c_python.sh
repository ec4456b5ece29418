# call C (session 38): tools/gpu_test.sh python (the torch ops from Python: the session's new checks in
# test_ops_gpu.py, test_attention_gpu.py, dist_tp_check.py). Carries build/bin build/lib .carry/rdma build/softverbs.
mkdir -p $OUT/c
source tools/gpu_env.sh
tools/gpu_test.sh python > $OUT/c/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/c/gpu_test.log
grep -h "FAILED\|Failure\|Error\|timed out\|HUNG\|passed\|failed" $OUT/c/gpu_test.log | cut -c1-300 | head -40
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
