#!/usr/bin/env bash
# Session 22 (1 GPU, ~4 minutes): the final tree (Transport::in_flight, emu's stage word, the work-queue warning) on
# the emu paths, time-sliced as tools/gpu_test.sh runs them: the whole dist tier 2x1, the TP/infra tests 2x2, the
# ring and TP checks from Python across 2 emulated nodes; then whether the setup warning shows with
# CUDA_DEVICE_MAX_CONNECTIONS=1. Carry build/bin, build/lib. Logs to $OUT/verify.tgz.
cd "$(dirname "$0")/../../.."
source tools/gpu_env.sh
source tools/gpu_steps.sh
R=$OUT/verify; mkdir -p $R
trap 'tar czf $OUT/verify.tgz -C $OUT verify && rm -rf $R' EXIT
shared_infra='Dist.Topology*:Dist.Symmetric*:Dist.Mismatched*:Net.Puts*'
py="env PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
{
run tools/mkrun -n 2 --timeout 230 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests
run tools/mkrun -n 4 --timeout 230 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=2 build/bin/mk_dist_tests \
    --gtest_filter="AgGemm*:GemmRs*:GemmAr*:$shared_infra"
step_s=200 run $py MK_RANKS_PER_NODE=1 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
step_s=200 run $py MK_RANKS_PER_NODE=1 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
} > $R/tiers.log 2>&1
grep -E "^=== (PASSED|FAILED|SKIPPED)" $R/tiers.log | cut -c1-150
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 60 tools/mkrun -n 2 --timeout 55 env MK_SHARE_GPUS=1 MK_RANKS_PER_NODE=1 \
  build/bin/mk_dist_tests --gtest_filter='Dist.Topology*' > $R/warn.log 2>&1
echo "warning check rc=$?: $(grep -c 'CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream' $R/warn.log) lines"
grep -m1 -o "rank 0: the emu network's proxy.\{0,160\}" $R/warn.log
