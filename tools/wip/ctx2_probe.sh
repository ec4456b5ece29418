#!/usr/bin/env bash
# Runs tools/wip/ctx2_probe.cu on one GPU (~2 minutes; build it here first:
#   nvcc -O2 -gencode=arch=compute_90a,code=sm_90a tools/wip/ctx2_probe.cu -lcuda -o .carry/ctx2_probe
# and carry .carry): the proxy's side work on a primary-context stream (today's emu) against a second context's
# stream, with the default work queues, with CUDA_DEVICE_MAX_CONNECTIONS=1, and under a private MPS daemon.
# Expected from bench/results/emu-work-queue-20261203.md: p_* starve with one queue; the question is c2_*.
# Logs to $OUT/ctx2.tgz.
cd "$(dirname "$0")/../.."
source tools/gpu_env.sh
R=$OUT/ctx2; mkdir -p $R
P=.carry/ctx2_probe
sweep() {  # label
  for side in p_memop c2_memop p_copy c2_copy; do
    timeout 30 $P $side 262144 3 >> $R/$1.log 2>&1
    echo "$1 $side: $(tail -3 $R/$1.log | grep -c STARVED) of 3 starved; $(tail -3 $R/$1.log | grep -o 'end [0-9.]* ms' | tr '\n' ' ')"
  done
  timeout 30 $P c2_copy 67108864 2 >> $R/$1.log 2>&1
  echo "$1 c2_copy 64 MB: $(tail -2 $R/$1.log | grep -o 'end [0-9.]* ms' | tr '\n' ' ')"
}
{
sweep default
CUDA_DEVICE_MAX_CONNECTIONS=1 sweep conn1
source tools/mps_daemon.sh
if mps_start; then
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 sweep mps
  mps_stop
fi
} 2>&1 | tee $R/summary.txt
tar czf $OUT/ctx2.tgz -C $OUT ctx2 && rm -rf $R
