#!/usr/bin/env bash
# Session 25, call E: tools/gpu_test.sh on the session's tree (emu's early chunks and the agent's chunk ordering,
# c2ac9e4..0f684b4). Logs to $OUT/e.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/e; mkdir -p $R
{
git log --oneline -1
step_s=560 run timeout 555 bash tools/gpu_test.sh > $R/gpu_test.log 2>&1
grep "^===" $R/gpu_test.log
} > $R/summary.txt 2>&1
cat $R/summary.txt | grep -v "^=== [^PFS]"
grep -h "FAILED  \]\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head -20
tar czf $OUT/e.tgz -C $OUT e && rm -rf $R
