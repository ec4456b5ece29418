#!/usr/bin/env bash
# Session 24, call D: the final tree (emu agent: one fence per batch for the signals and one for the done words;
# the batch's slot bodies in one PCIe round trip; small slots a warp each). Under one private MPS daemon,
# alternating base (4206fe1's mkbench) and final: `mkbench net_latency net_bw` 2x1 emu. Then tools/mps_test.sh
# (TP 1x2, the dist tier 2x1 on emu under MPS, ring checks) and dist_tp_check.py 2x1 (time-sliced: autograd,
# torch.compile, CUDA graphs across emulated nodes). Logs to $OUT/d.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/d; mkdir -p $R
{
source tools/mps_daemon.sh
if mps_start; then
  for v in base final base final; do
    bin=build/bin/mkbench; [ $v = base ] && bin=.carry/base/bin/mkbench
    step_s=45 run tools/mkrun -n 2 --timeout 40 env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=15000 MK_NET_TIMEOUT_MS=15000 MK_RANKS_PER_NODE=1 $bin --out $R/bench_$v \
        net_latency net_bw >> $R/net_$v.log 2>&1
  done
  mps_stop
fi
MK_GPU_TEST_STEP_S=90 step_s=200 run bash tools/mps_test.sh > $R/mps.log 2>&1
grep "^===" $R/mps.log
step_s=150 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 \
    MK_RANKS_PER_NODE=1 MK_TIMEOUT_MS=60000 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py \
    > $R/tp_check_2x1.log 2>&1
tail -2 $R/tp_check_2x1.log
} > $R/summary.txt 2>&1
cat $R/summary.txt | grep -v "^=== [^PFS]"
for f in $R/net_*.log; do echo "--- $f"; grep -h "^| emu\|one way" $f | grep -v "^|---" | cut -c70- | head -20; done
grep -h "FAILED  \]\|stuck\|timed out\|no progress" $R/*.log | sort | uniq -c | head -20
tar czf $OUT/d.tgz -C $OUT d && rm -rf $R
