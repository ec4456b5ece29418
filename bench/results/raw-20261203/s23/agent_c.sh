#!/usr/bin/env bash
# Session 23, call C (tree: 5dff6ea + the agent's 16-deep copy): mkbench
# net_latency / net_bw on 2x1 emu under MPS (two ranks resident together,
# half the SMs each), before (3738af7, .carry/old) and after, alternating
# twice; then tools/gpu_test.sh for the rest of the call (bounded: the steps
# it reaches). Logs to $OUT/c.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/c; mkdir -p $R
{
source tools/mps_daemon.sh
if mps_start; then
  for v in old new old new; do
    bin=build/bin/mkbench; [ $v = old ] && bin=.carry/old/bin/mkbench
    step_s=40 run tools/mkrun -n 2 --timeout 35 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 $bin --out $R/bench_$v \
        net_latency net_bw >> $R/net_$v.log 2>&1
  done
  mps_stop
fi
step_s=430 run timeout 425 bash tools/gpu_test.sh > $R/gpu_test.log 2>&1
grep "^===" $R/gpu_test.log
} > $R/summary.txt 2>&1
cat $R/summary.txt
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu\|one way" $f | grep -v "^|---" | head -20; done
grep -h "FAILED  \]\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head -20
tar czf $OUT/c.tgz -C $OUT c && rm -rf $R
