#!/usr/bin/env bash
# Written in session 27 (NOT run: no device time left), for tools/wip/fabric-agent-stage.patch applied and built: fabric's staging made by the kernels' delivery agent (MK_FABRIC_STAGE=agent, new default),
# two ranks as 2 nodes sharing the one H200, tcp;ofi_rxm (libfabric carried in .carry/rdma).
#  1. DeliveryAgent.* x2 (the new FabricStagingCopiesOutAndDeliversWithItsSignal among them).
#  2. Net* and the TP ops' tests over fabric, time-sliced (MK_LOG=info: the provider line says how GPU regions go).
#  3. The hazard: CUDA_DEVICE_MAX_CONNECTIONS=1 (one hardware work queue), the TP ops' 100 back-to-back calls,
#     MK_FABRIC_STAGE=cuda (the proxy's copies on its streams) then agent; 5 s wait bounds.
#  4. Net* and the TP ops under a private MPS daemon (50% each); 5. the ring attention tests, time-sliced.
# Within G_LIMIT s (default 170; the session's device time is short): steps in this order while time is left. Logs to $OUT/g.tgz.
cd "$(dirname "$0")/../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
R=$OUT/g; mkdir -p $R
T0=$(date +%s)
left() { echo $((${G_LIMIT:-170} - ($(date +%s) - T0))); }
F="MK_RANKS_PER_NODE=1 MK_NET=fabric MK_FI_PROVIDER=tcp;ofi_rxm MK_SHARE_GPUS=1"
TP='AgGemm*:GemmRs*:GemmAr*'
H='AgGemmTest.HundredBackToBackCallsWithChangingInputs:GemmRsTest.HundredBackToBackCallsWithChangingInputs'
{
step_s=30 run build/bin/mk_gpu_tests --gtest_filter='DeliveryAgent.*' --gtest_repeat=2 > $R/agent_tests.log 2>&1
step_s=60 run tools/mkrun -n 2 --timeout 55 env $F MK_LOG=info MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter="Net*:$TP" > $R/ts_agent.log 2>&1
for st in cuda agent; do
  [ $(left) -gt 30 ] && step_s=$(( $(left) < 45 ? $(left) : 45 )) run tools/mkrun -n 2 --timeout 40 env $F \
      CUDA_DEVICE_MAX_CONNECTIONS=1 MK_FABRIC_STAGE=$st MK_TIMEOUT_MS=5000 MK_NET_TIMEOUT_MS=5000 \
      build/bin/mk_dist_tests --gtest_filter="$H" > $R/conn1_$st.log 2>&1
done
if [ $(left) -gt 40 ] && mps_start; then
  step_s=$(($(left) - 8)) run tools/mkrun -n 2 --timeout $(($(left) - 12)) env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $F \
      MK_TIMEOUT_MS=20000 build/bin/mk_dist_tests --gtest_filter="Net*:$TP" > $R/mps_agent.log 2>&1
  mps_stop
fi
[ $(left) -gt 30 ] && step_s=$(left) run tools/mkrun -n 2 --timeout $(($(left) - 5)) env $F MK_TIMEOUT_MS=60000 \
    build/bin/mk_dist_tests --gtest_filter='RingAttn*' > $R/ts_ring.log 2>&1
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt | cut -c1-230
grep -h "^\[  PASSED\|^\[  FAILED  \] [0-9]\|tests ran" $R/*.log | sort | uniq -c | head
for f in $R/*.log; do echo "--- $f: $(grep -c '  OK \]' $f) OK, $(grep -c '  FAILED  \]' $f) FAILED"; done
grep -h "fabric provider\|staged\|timed out\|Failure\|what()" $R/*.log | sort | uniq -c | cut -c1-260 | head -14
tar czf $OUT/g.tgz -C $OUT g && rm -rf $R
