# call C (session 35): tools/wip/claim_race_probe.cu under racecheck. Call A's modes 0 and 1 hit racecheck's hazard
# cap (the bulk copies' write-write pairs, millions), which may have dropped a claim-slot report: mode 0 again with
# the cap raised, and mode 2 (run_compute's setmaxnreg split first). Carries .carry/claim_race_probe.
mkdir -p $OUT/c
source tools/gpu_env.sh
for m in 2 0; do
  timeout 60 .carry/claim_race_probe $m 3 > $OUT/c/probe_plain_$m.log 2>&1; echo "probe $m plain rc=$?"; tail -1 $OUT/c/probe_plain_$m.log
  NV_COMPUTE_SANITIZER_MAX_RACECHECK_HAZARDS=200000000 timeout 200 compute-sanitizer --tool racecheck --print-limit 20 \
    .carry/claim_race_probe $m 1 > $OUT/c/probe_race_$m.log 2>&1
  echo "probe $m racecheck rc=$?"; grep -h "Warning\|Race reported\|SUMMARY\|copied" $OUT/c/probe_race_$m.log | cut -c1-200
done
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
