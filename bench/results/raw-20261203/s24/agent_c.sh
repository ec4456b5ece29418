#!/usr/bin/env bash
# Session 24, call C: the agent's claim and copy reworked (v2: the batch's slot bodies in one PCIe round trip, 4
# lanes a slot; small slots copied a warp each, with their loads in flight at once), against call B's fence
# variant; v3 = v2 with net::flush's wait pausing 1 us between reads of the host done word (8 sender CTAs wait in
# quiet() in net_bw: do their host reads slow the agent's system-scope fences?). All with agent-stats.patch.
# Under one private MPS daemon, alternating; `mkbench net_latency net_bw` 2x1 emu. Then the tree's build (v2's
# code without the stats): PeerCopy + Signals, the dist tier 2x1 time-sliced, and the work-queue reproducer
# (CUDA_DEVICE_MAX_CONNECTIONS=1). Logs to $OUT/c.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/c; mkdir -p $R
{
source tools/mps_daemon.sh
if mps_start; then
  for v in fence v2 v3 fence v2 v3; do
    step_s=45 run tools/mkrun -n 2 --timeout 40 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 .carry/$v/bin/mkbench --out $R/bench_$v \
        net_latency net_bw >> $R/net_$v.log 2>&1
  done
  mps_stop
fi
step_s=60 run build/bin/mk_gpu_tests --gtest_filter='PeerCopy*:Signals*' > $R/gpu_copy.log 2>&1
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_NET_TIMEOUT_MS=20000
step_s=170 run tools/mkrun -n 2 --timeout 165 env MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests > $R/dist2x1.log 2>&1
tail -1 $R/dist2x1.log
step_s=150 run tools/mkrun -n 2 --timeout 145 env CUDA_DEVICE_MAX_CONNECTIONS=1 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests \
    --gtest_filter='Net.*:GemmAr*:GemmRs*:AgGemm*:GemmPeer*:RingAttn*' > $R/dist2x1_conn1.log 2>&1
tail -1 $R/dist2x1_conn1.log
} > $R/summary.txt 2>&1
cat $R/summary.txt | grep -v "^=== [^PFS]"
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu\|one way" $f | grep -v "^|---" | cut -c70- | head -20; done
grep -h "FAILED  \]\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head -20
tar czf $OUT/c.tgz -C $OUT c && rm -rf $R
