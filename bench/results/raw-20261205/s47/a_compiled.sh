# call A (session 47): `tools/gpu_test.sh compiled` at the session's changes: Network's transport-open exchange,
# emu's shared link and connect exchange, alloc_symmetric's release on a failed exchange, SignalLease's exchange
# while unwinding (new Dist.SignalsReleasedWhileOneRankUnwindsStayInStep), ~Communicator's device sync, the
# standalone reduce's hardware rounding (new GemmArTest.AllReduceKeepsNanAndInfinities), the reports' source ranks,
# the deregister drain test over emu (Net.DeregisteringWaitsForEveryPushedCommand), the new MK_NET_THREADS=2 step.
# Carries build/bin build/lib.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 570 tools/gpu_test.sh compiled > $OUT/a/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/a/gpu_test.log | cut -c1-250
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error\|deregistering anyway" $OUT/a/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
