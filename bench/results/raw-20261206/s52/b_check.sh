# call B (session 52): the fabric and verbs tiers, racecheck over mk_gpu_tests (the widened PeerCopy copier test
# among them), then claim_race_probe modes 3 and 4 under racecheck. Carries build/bin build/lib .carry/rdma
# build/softverbs .carry/claim_race_probe.
mkdir -p $OUT/b; source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 380 tools/gpu_test.sh fabric verbs > $OUT/b/fv.log 2>&1
echo "fabric verbs rc=$?"; grep -h '^=== [PFS]' $OUT/b/fv.log | cut -c1-160 | sed 's/LD_LIBRARY_PATH=[^ ]* //'
SANITIZE_STEP_S=110 timeout 130 tools/sanitize_gpu.sh racecheck $OUT/b/rc gpu > $OUT/b/rc.log 2>&1
echo "racecheck gpu rc=$?"; tail -8 $OUT/b/rc.log
for m in 3 4; do
  timeout 40 compute-sanitizer --tool racecheck --print-limit 50 .carry/claim_race_probe $m > $OUT/b/probe$m.log 2>&1
  echo "probe mode $m rc=$?"; grep -h "SUMMARY\|Race reported\|hazard\|ok\|FAIL\|wrong" $OUT/b/probe$m.log | sort | uniq -c | head -8
done
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
