#!/usr/bin/env bash
# Session 24, call A: tools/gpu_test.sh on the tree 4206fe1 (the EmuRing split e6ddc93 and the
# structural agent commit 4206fe1 had not run on a GPU). Logs to $OUT/a.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/a; mkdir -p $R
{
git log --oneline -1
step_s=560 run timeout 555 bash tools/gpu_test.sh > $R/gpu_test.log 2>&1
grep "^===" $R/gpu_test.log
} > $R/summary.txt 2>&1
cat $R/summary.txt | grep -v "^=== [^PFS]"
grep -h "FAILED  \]\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head -20
tar czf $OUT/a.tgz -C $OUT a && rm -rf $R
