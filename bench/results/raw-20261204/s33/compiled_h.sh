# call H (session 33): the tree of call G (teardown on a failed device; the new --failed-teardown-scenario step):
# the compiled part of tools/gpu_test.sh. Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/h
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled > $OUT/h/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/h/gpu_test.log
tar czf $OUT/h-out.tgz -C $OUT h; rm -rf $OUT/h
