# call G (session 44): ring attention's InterSend command posts on 2x1 emu since the abort-word fix (2026-12-01:
# waits read the host-mapped abort word once per 100 ms; the 2026-12-01 10:23 trace, before it, had posts of
# ~92 us, release stage ~90 us). One GPU, two ranks at the same time through a private MPS daemon (half the SMs
# each: the post latencies are the point, not the kernel time). tools/ring_trace.py at S_local 2048 and 8192
# (2x1 emu), and 2048 on 1x2 for comparison. Carries build/bin build/lib.
mkdir -p $OUT/g
source tools/gpu_env.sh; source tools/mps_daemon.sh
trap mps_stop EXIT
mps_start || { echo "MPS daemon did not start"; exit 1; }
export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
for cfg in "1 2048" "1 8192" "2 2048"; do
  set -- $cfg
  log=$OUT/g/trace-rpn$1-$2.log
  timeout --foreground 100 env MK_RANKS_PER_NODE=$1 torchrun --standalone --nproc_per_node=2 tools/ring_trace.py \
    --seq $2 --calls 5 > $log 2>&1
  echo "rpn=$1 seq=$2 rc=$?"; grep -h "kernel:\|command posts\|post stages" $log | cut -c1-220 | head -6
done
tar czf $OUT/g-out.tgz -C $OUT g; rm -rf $OUT/g
