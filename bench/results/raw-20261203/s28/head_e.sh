#!/usr/bin/env bash
# Session 28, call E: HEAD's binaries (0a8695d's host fixes after call D), fabric agent staging, time-sliced on the
# one H200: Net* twice and the TP dist tests once, bounded to fit the session's last device time. Logs to $OUT/e.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
R=$OUT/e; mkdir -p $R
F="MK_RANKS_PER_NODE=1 MK_NET=fabric MK_FI_PROVIDER=tcp;ofi_rxm MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
{
step_s=85 run tools/mkrun -n 2 --timeout 80 env $F build/bin/mk_dist_tests --gtest_filter='Net*' --gtest_repeat=2 \
    > $R/net.log 2>&1
step_s=50 run tools/mkrun -n 2 --timeout 45 env $F build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*' \
    > $R/tp.log 2>&1
} > $R/summary.txt 2>&1
grep "^===" $R/summary.txt | cut -c1-170
for f in $R/*.log; do echo "--- $(basename $f): $(grep -c '  OK \]' $f) OK, $(grep -c '  FAILED  \]' $f) FAILED"; done
grep -h "waited\|not made\|timed out\|Failure" $R/*.log | sort | uniq -c | cut -c1-220 | head
tar czf $OUT/e.tgz -C $OUT e && rm -rf $R
