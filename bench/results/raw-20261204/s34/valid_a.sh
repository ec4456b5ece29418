# call A (session 34): HEAD 87461ac (ee5c55d, 0ca622f, c3a27a8, 7b7ba65, 87461ac never ran on a GPU):
# the compiled tier (with the --failed-teardown-scenario step) and the fabric part of tools/gpu_test.sh.
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
git log --oneline -1
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled fabric > $OUT/a/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/a/gpu_test.log
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
