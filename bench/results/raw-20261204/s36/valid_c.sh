# call C (session 36): HEAD d44aab3 (teardown_call: refused release calls clear their error in the library's runtime).
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
git log --oneline -1
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled fabric > $OUT/c/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/c/gpu_test.log
grep -h "FAILED\|Failure\|timed out" $OUT/c/gpu_test.log | cut -c1-300 | head -20
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
