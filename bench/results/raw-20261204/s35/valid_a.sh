# call A (session 35): HEAD 3425ed5. Never ran on a GPU: 6d9fc81 (plans keep signal words when free fails),
# e2e57a0 (proxy thread capture mode, fatal message, reap after drain), 5b85771 (one event per poll's deliveries),
# 1bafbd5 (gpu_test.sh fabric also runs op tests with MK_FABRIC_STAGE=cuda).
# 1) the compiled tier + fabric part of tools/gpu_test.sh; 2) session 34's call K again (MK_FABRIC_STAGE=cuda: the
# one-queue step must say the stall at half the bound); 3) racecheck on tools/wip/claim_race_probe.cu, modes 0 and 1.
# Carries build/bin build/lib .carry/rdma .carry/claim_race_probe.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
git log --oneline -1
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled fabric > $OUT/a/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/a/gpu_test.log
(export MK_FABRIC_STAGE=cuda
 MK_GPU_TEST_STEP_S=150 tools/gpu_test.sh fabric > $OUT/a/gpu_test_cuda.log 2>&1
 echo "gpu_test cuda rc=$?")
grep -h '^=== [PFS]' $OUT/a/gpu_test_cuda.log
grep -h "arrived .* ms ago\|not run yet\|timed out after\|did not finish" $OUT/a/gpu_test_cuda.log | cut -c1-400 | head -8
for m in 0 1; do
  timeout 60 .carry/claim_race_probe $m > $OUT/a/probe_plain_$m.log 2>&1; echo "probe $m plain rc=$?"; tail -2 $OUT/a/probe_plain_$m.log
  timeout 150 compute-sanitizer --tool racecheck --print-limit 20 .carry/claim_race_probe $m > $OUT/a/probe_race_$m.log 2>&1
  echo "probe $m racecheck rc=$?"; tail -4 $OUT/a/probe_race_$m.log
done
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
