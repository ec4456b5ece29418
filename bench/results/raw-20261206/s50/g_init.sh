# call G (session 50): initcheck over the whole dist tier, 1x2 and 2x1 emu, with tools/sanitize_gpu.sh leaving
# out the two-stream ordering tests under initcheck (calls E-F: a launch behind their gate kernel waits for it
# under this tool). Carries build/bin build/lib (tests/dist/tp_test_util.hpp as at HEAD: the 4 s gate).
mkdir -p $OUT/g
export SANITIZE_DIST_FILTER='-Dist.PingPong*:*Child*:*TimedOut*:*Abort*:*Host*:DeliveryAgent.FabricStaging*'
SANITIZE_ARGS="--kernel-name-exclude kns=cublas,kns=nvjet" SANITIZE_STEP_S=140 timeout 290 \
  tools/sanitize_gpu.sh initcheck $OUT/g/initcheck dist emu; echo "initcheck rc=$?"
grep -h "FAILED  \]\|PASSED  \]" $OUT/g/initcheck/*.log | sort | uniq -c
tar czf $OUT/g-out.tgz -C $OUT g; rm -rf $OUT/g
