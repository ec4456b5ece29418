# call K (session 34): MK_FABRIC_STAGE=cuda's receive side now marks each delivery's end with an event and says a
# delivery that has not run after half MK_TIMEOUT_MS (stalled(), in_flight()). The fabric part of tools/gpu_test.sh
# with MK_FABRIC_STAGE=cuda (as call C): step 1 must still pass; the one-queue step still fails (by design), now
# with the stall said before the kernel's timeout. Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/k
source tools/gpu_env.sh; source tools/gpu_steps.sh
export MK_FABRIC_STAGE=cuda
MK_GPU_TEST_STEP_S=150 tools/gpu_test.sh fabric > $OUT/k/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/k/gpu_test.log
grep -h "arrived .* ms ago\|not run yet\|timed out after\|did not finish" $OUT/k/gpu_test.log | cut -c1-400 | head -8
tar czf $OUT/k-out.tgz -C $OUT k; rm -rf $OUT/k
