# call F (session 50): call E's initcheck over the whole dist tier again, with the test fix (the two-stream
# ordering tests' gate waits as long as the ops, MK_TIMEOUT_MS: under the tool the 4 s gate ran out before the
# host opened it), then synccheck over the gpu part. Carries build/bin build/lib.
mkdir -p $OUT/f
export SANITIZE_DIST_FILTER='-Dist.PingPong*:*Child*:*TimedOut*:*Abort*:*Host*:DeliveryAgent.FabricStaging*'
SANITIZE_ARGS="--kernel-name-exclude kns=cublas,kns=nvjet" SANITIZE_STEP_S=150 timeout 320 \
  tools/sanitize_gpu.sh initcheck $OUT/f/initcheck dist emu; echo "initcheck rc=$?"
grep -h "FAILED  \]\|PASSED  \]" $OUT/f/initcheck/*.log | sort | uniq -c
SANITIZE_STEP_S=150 timeout 170 tools/sanitize_gpu.sh synccheck $OUT/f/synccheck gpu; echo "synccheck rc=$?"
grep -h "FAILED  \]\|PASSED  \]" $OUT/f/synccheck/*.log | sort | uniq -c
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
