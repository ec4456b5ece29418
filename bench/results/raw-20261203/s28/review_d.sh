#!/usr/bin/env bash
# Session 28, call D: after the review of fabric's agent staging (recv_kernel of Net.PutsWithSignals... runs the
# agent; stalled deliveries said; copy_in/signal refused; drain bool; copy_v16 copies a common misaligned head by
# bytes, then vectors). Two ranks as 2 nodes on the one H200.
#  1. PeerCopy.* (copy_v16 at every size/offset, new (3,3) offsets and the agent's form) + DeliveryAgent.* x2.
#  2. fabric (tcp;ofi_rxm, agent staging): Net* x3 time-sliced, then Net*+TP once under MPS, the one-queue step.
#  3. emu 2x1 Net* time-sliced (the agent's copies changed).
#  4. net_latency, MPS 50%: fabric cuda vs agent, alternated, 3 rounds; emu (2 agents) twice.
# Within D_LIMIT s (default 420). Logs to $OUT/d.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
R=$OUT/d; mkdir -p $R
T0=$(date +%s)
left() { echo $((${D_LIMIT:-420} - ($(date +%s) - T0))); }
F="MK_RANKS_PER_NODE=1 MK_NET=fabric MK_FI_PROVIDER=tcp;ofi_rxm MK_SHARE_GPUS=1"
E="MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1"
TP='AgGemm*:GemmRs*:GemmAr*'
H='AgGemmTest.HundredBackToBackCallsWithChangingInputs:GemmRsTest.HundredBackToBackCallsWithChangingInputs'
{
step_s=60 run build/bin/mk_gpu_tests --gtest_filter='PeerCopy.*' > $R/peer_copy.log 2>&1
step_s=40 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=2 > $R/agent_tests.log 2>&1
step_s=100 run tools/mkrun -n 2 --timeout 95 env $F MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='Net*' --gtest_repeat=3 > $R/fabric_net_ts.log 2>&1
step_s=40 run tools/mkrun -n 2 --timeout 35 env $F CUDA_DEVICE_MAX_CONNECTIONS=1 MK_TIMEOUT_MS=5000 \
    MK_NET_TIMEOUT_MS=5000 build/bin/mk_dist_tests --gtest_filter="$H" > $R/fabric_conn1.log 2>&1
step_s=60 run tools/mkrun -n 2 --timeout 55 env $E MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='Net*' > $R/emu_net_ts.log 2>&1
if mps_start; then
  step_s=60 run tools/mkrun -n 2 --timeout 55 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $F MK_TIMEOUT_MS=20000 \
      build/bin/mk_dist_tests --gtest_filter="Net*:$TP" > $R/fabric_mps.log 2>&1
  for k in 1 2 3; do
    for st in cuda agent; do
      [ $(left) -gt 45 ] && step_s=40 run tools/mkrun -n 2 --timeout 35 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $F \
          MK_TIMEOUT_MS=20000 MK_NET_TIMEOUT_MS=20000 MK_FABRIC_STAGE=$st build/bin/mkbench --out $R/b_$st \
          net_latency >> $R/lat_$st.log 2>&1
    done
    [ $k -le 2 ] && [ $(left) -gt 45 ] && step_s=40 run tools/mkrun -n 2 --timeout 35 env \
        CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $E MK_TIMEOUT_MS=20000 build/bin/mkbench --out $R/b_emu net_latency \
        >> $R/lat_emu.log 2>&1
  done
  mps_stop
fi
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
grep "^=== PASSED\|^=== FAILED\|^=== SKIPPED\|elapsed" $R/summary.txt | cut -c1-150
for f in $R/*.log; do echo "--- $(basename $f): $(grep -c '  OK \]' $f) OK, $(grep -c '  FAILED  \]' $f) FAILED"; done
for v in cuda agent emu; do echo "== $v"; grep -h "^| \(fabric\|emu\)" $R/lat_$v.log | head -12; done
grep -h "waited\|timed out\|Failure\|what()" $R/*.log | sort | uniq -c | cut -c1-260 | head -12
tar czf $OUT/d.tgz -C $OUT d && rm -rf $R
