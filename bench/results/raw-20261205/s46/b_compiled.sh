# call B (session 46): `tools/gpu_test.sh compiled` at the session's library changes: the plans' 2^31 dimension
# check (AgGemm, GemmRs, GemmAr), GEMM+AR's final-signal range check against the schedule's row-blocks (every
# GemmAr launch passes it), the communicator's unsupported-GPU message (Hopper here: not triggered), the bootstrap's
# id carrying its root's bound, mkrun's argument checks, the launch port rule, the proxy's bound from the last
# completion, deregister_buffer's bounded drain (a wrong count: "deregistering anyway" warnings, 11 s per plan).
# Carries build/bin build/lib.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 560 tools/gpu_test.sh compiled > $OUT/b/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/b/gpu_test.log | cut -c1-250
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error\|deregistering anyway" $OUT/b/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
