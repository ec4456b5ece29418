#!/usr/bin/env bash
# Session 27, call E: the libfabric transport on a GPU for the first time (tcp;ofi_rxm over loopback, GPU memory
# staged through pinned host buffers by the proxy; libfabric and its libraries carried in .carry/rdma by
# tools/carry_rdma.sh). Two ranks as 2 nodes sharing the one H200:
#  1. Net* time-sliced (MK_SHARE_GPUS=1);
#  2. the TP ops' dist tests (AgGemm*, GemmRs*, GemmAr*) time-sliced, over fabric;
#  3. Net* under a private MPS daemon (50% each), where a proxy's CUDA copies may wait behind queued work
#     (README, Hardware work queues).
# Within 430 s in all. Logs to $OUT/e.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
R=$OUT/e; mkdir -p $R
T0=$(date +%s)
left() { echo $((430 - ($(date +%s) - T0))); }
F="MK_RANKS_PER_NODE=1 MK_NET=fabric MK_FI_PROVIDER=tcp;ofi_rxm MK_SHARE_GPUS=1"
{
ldd build/lib/libmkernel.so | grep -i "fabric\|not found"
step_s=150 run tools/mkrun -n 2 --timeout 145 env $F MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='Net*' > $R/ts_net.log 2>&1
step_s=170 run tools/mkrun -n 2 --timeout 165 env $F MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
    --gtest_filter='AgGemm*:GemmRs*:GemmAr*' > $R/ts_tp.log 2>&1
if [ $(left) -gt 40 ] && mps_start; then
  step_s=$(($(left) - 10)) run tools/mkrun -n 2 --timeout $(($(left) - 15)) env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 \
      $F MK_TIMEOUT_MS=20000 build/bin/mk_dist_tests --gtest_filter='Net*' > $R/mps_net.log 2>&1
  mps_stop
fi
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt | cut -c1-200
grep -h "^\[  FAILED\|^\[  PASSED\|tests ran\|network:" $R/*.log | sort | uniq -c | cut -c1-200 | head -30
grep -h "timed out\|error\|Error" $R/*.log | sort | uniq -c | cut -c1-250 | head -12
tar czf $OUT/e.tgz -C $OUT e && rm -rf $R
