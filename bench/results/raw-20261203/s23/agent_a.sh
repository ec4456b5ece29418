#!/usr/bin/env bash
# Session 23, call A: emu's delivery agent (a CTA of each kernel that pushes
# network commands) on one H200, two ranks time-slicing it (MK_SHARE_GPUS=1)
# as 2 emulated nodes: the whole dist tier; the work-queue reproducer
# (CUDA_DEVICE_MAX_CONNECTIONS=1: every stream in one hardware queue); the
# TP checks from Python on 2x1 emu, now with autograd, torch.compile and graphs;
# the network micro-benchmarks. Logs to $OUT/a.tgz.
cd "$(dirname "$0")/../../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/a; mkdir -p $R
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_NET_TIMEOUT_MS=20000
{
step_s=170 run tools/mkrun -n 2 --timeout 165 env MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests > $R/dist2x1.log 2>&1
tail -1 $R/dist2x1.log
step_s=150 run tools/mkrun -n 2 --timeout 145 env CUDA_DEVICE_MAX_CONNECTIONS=1 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests \
    --gtest_filter='Net.*:GemmAr*:GemmRs*:AgGemm*:GemmPeer*:RingAttn*' > $R/dist2x1_conn1.log 2>&1
tail -1 $R/dist2x1_conn1.log
step_s=60 run tools/mkrun -n 2 --timeout 55 env MK_RANKS_PER_NODE=1 build/bin/mkbench --out $R/bench net_latency net_bw > $R/netbench.log 2>&1
tail -1 $R/netbench.log
step_s=150 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_RANKS_PER_NODE=1 \
    torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py > $R/tp_check_2x1.log 2>&1
tail -3 $R/tp_check_2x1.log
} > $R/summary.txt 2>&1
cat $R/summary.txt
grep -h "FAILED\|stuck\|timed out\|Deliver" $R/*.log | head -30
grep -h "one way\||" $R/netbench.log | head -30
tar czf $OUT/a.tgz -C $OUT a && rm -rf $R
