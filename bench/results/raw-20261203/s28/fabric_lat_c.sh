#!/usr/bin/env bash
# Session 28, call C: fabric's staging by the delivery agent (MK_FABRIC_STAGE=agent) against the proxy's CUDA
# copies (cuda), one-way latency (mkbench net_latency: 8 B, 64 KB, 1 MB, 4 MB ping-pong), two ranks as 2 nodes on
# the one H200 under a private MPS daemon (50% each), tcp;ofi_rxm over loopback, alternated, 4 rounds.
# net_bw is left out: 256 MB a size through loopback tcp is minutes a run. Logs to $OUT/c.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
source tools/mps_daemon.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
R=$OUT/c; mkdir -p $R
T0=$(date +%s)
left() { echo $((300 - ($(date +%s) - T0))); }
F="MK_RANKS_PER_NODE=1 MK_NET=fabric MK_FI_PROVIDER=tcp;ofi_rxm MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_NET_TIMEOUT_MS=20000"
{
if mps_start; then
  for k in 1 2 3 4; do
    for st in cuda agent; do
      [ $(left) -gt 50 ] && step_s=45 run tools/mkrun -n 2 --timeout 40 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 $F \
          MK_FABRIC_STAGE=$st build/bin/mkbench --out $R/bench_$st net_latency >> $R/lat_$st.log 2>&1
    done
  done
  mps_stop
fi
echo "elapsed $(($(date +%s) - T0)) s"
} > $R/summary.txt 2>&1
cat $R/summary.txt | cut -c1-200
for st in cuda agent; do echo "== $st"; grep -h "fabric:tcp" $R/lat_$st.log | grep -v "mkernel\|===" | head -20; done
tar czf $OUT/c.tgz -C $OUT c && rm -rf $R
