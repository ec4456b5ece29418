# call A (session 33): HEAD 61b14bf (2be0808, ca72ee0, 1b60e98, 3873814, c313b78, 61b14bf never ran on a GPU):
# the compiled tier and the fabric part of tools/gpu_test.sh.
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
git log --oneline -1
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled fabric > $OUT/a/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/a/gpu_test.log
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
