#!/usr/bin/env bash
# Runs the GPU test tiers from an existing build (e.g. build/bin + build/lib
# carried to the GPU machine): the one-GPU tier, then the dist tier on 2 GPUs
# as 1x2 (NVLink) and 2x1 (MK_RANKS_PER_NODE=1), abort propagation, 2x2 as
# 4 ranks on 2 GPUs. On a one-GPU machine the ranks share it (MK_SHARE_GPUS,
# correctness only): the dist tier's op tests and the torchrun checks.
#   tools/gpu_test.sh [compiled] [python] [fabric] [verbs] [bench]
# runs those parts only (default: all): the C++ test binaries, the Python and
# torchrun checks, the network over libfabric, the network over verbs (on
# softverbs: carry build/softverbs), the TP benchmarks' own checks (mkbench
# --quick: every baseline and mkernel output against serial; on one GPU the
# ranks share it, mkbench's shared-GPU mode; reports into a temporary folder).
# On one GPU all of it takes over 600 s, a lent machine's limit for one
# command: split it over two there. A step that exits 77 ("skipped") fails a
# part named here, and every part where nvidia-smi lists a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
parts=" ${*:-compiled python fabric verbs bench} "
for p in $parts; do
  case $p in
    compiled | python | fabric | verbs | bench) ;;
    *) echo "usage: tools/gpu_test.sh [compiled] [python] [fabric] [verbs] [bench] (default: all); not a part: $p" >&2
       exit 2 ;;
  esac
done
want() { [[ "$parts" == *" $1 "* ]]; }
named() { [[ " ${args_given:-} " == *" $1 "* ]]; }
args_given="$*"  # parts named on the command line: a missing prerequisite of one is a failure, not a skip
# skip_or_fail PART WHY: a part left out for want of its carried files: skipped when it came with the default
# list, a failure when it was asked for by name (a green call where it never ran would be read as a pass).
skip_or_fail() {
  if named "$1"; then echo "=== FAILED: $1 asked for but not run: $2"; fail=1
  else echo "=== SKIPPED: $2"; fi
}
source tools/gpu_env.sh
source tools/gpu_steps.sh  # run: one bounded step (MK_GPU_TEST_STEP_S each)
# (bounded: a hung driver counts no GPU, and says so, rather than hanging the call)
smi_rc=0
smi=$(timeout -k 5 20 nvidia-smi -L 2>&1) || smi_rc=$?
ngpu=$(printf '%s\n' "$smi" | grep -c '^GPU' || true)
if [ "$smi_rc" -eq 124 ] || [ "$smi_rc" -eq 137 ]; then
  echo "=== FAILED: nvidia-smi -L did not answer within 20 s (a hung GPU driver?): counting no GPU"; fail=1
elif [ "$smi_rc" -ne 0 ]; then
  echo "=== nvidia-smi -L failed (exit $smi_rc: $(printf '%s\n' "$smi" | head -1)): counting no GPU"
fi
# CUDA_VISIBLE_DEVICES narrows what the tests see (an entry each; tools/bench.sh reads the entries more closely):
# the steps that need 2 GPUs must be left out by name where 1 is visible, as where nvidia-smi lists 1.
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ]; then
  IFS=',' read -ra cvd_entries <<< "$CUDA_VISIBLE_DEVICES"
  if [ "${#cvd_entries[@]}" -lt "${ngpu:-0}" ]; then
    echo "=== CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES': ${#cvd_entries[@]} of the $ngpu GPU(s) visible"
    ngpu=${#cvd_entries[@]}
  fi
fi
# skip_rule PART: a step's exit 77 ("skipped") fails PART (run: skip_fails) when it was asked for by name or
# nvidia-smi lists a GPU: a green call where the tests skipped would be read as a pass.
skip_rule() {
  skip_fails=
  if named "$1"; then skip_fails="'$1' was asked for by name"
  elif [ "${ngpu:-0}" -ge 1 ]; then skip_fails="nvidia-smi lists $ngpu GPU(s)"; fi
}
share=; [ "${ngpu:-0}" -eq 1 ] && share="MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
# The network backends the library was built with (mk_net_backends; CMake's MK_NET_BACKENDS leaves out those whose
# headers the building machine lacked), through the package. A library without that function predates the choice
# (the package refuses it): it has all three.
net_backends=$(PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" python3 -c \
               'import mkernel; print(" ".join(mkernel.net_backends()))' 2>/dev/null) || net_backends="verbs fabric emu"
has_backend() { [[ " $net_backends " == *" $1 "* ]]; }
if want compiled; then skip_rule compiled
run build/bin/mk_gpu_tests
# The CPU tier's tests that need a driver for their whole check (DeviceHealth.TeardownCallClearsARefusedCallsError:
# on the CPU machine it checks the warning only and skips the rest, saying so): where a GPU is, a skip fails.
if [ -x build/bin/mk_cpu_tests ] && [ "${ngpu:-0}" -ge 1 ]; then
  run bash -c 'o=$(build/bin/mk_cpu_tests --gtest_filter="DeviceHealth.*" 2>&1); r=$?; echo "$o"
               [ $r -eq 0 ] || exit $r
               ! grep -q "^\[  SKIPPED \]" <<< "$o" || { echo "a test skipped on a GPU machine"; exit 1; }'
fi
# A GPU per rank: with one GPU these are left out by name here, so that a 77 of a step that should run fails the
# part (skip_rule); the shared-GPU steps below stand in for the first two, and the third runs with the ranks
# sharing the GPU. The abort scenario does not: there both ranks' kernels trap, and on a GPU that two processes
# share (time-sliced) while each maps the other's memory, the driver left one process in cudaDeviceSynchronize for
# good (580.159.04, H100; without mkernel too: bench/results/session62-gpu-20261207.md, trap_share2.cu).
two_gpu_steps=(
  "tools/mkrun -n 2 --timeout 230 build/bin/mk_dist_tests"
  "tools/mkrun -n 2 --timeout 230 env MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests"
  "tools/mkrun -n 2 --timeout 230 env MK_SYMM_MODE=ipc build/bin/mk_dist_tests"
  "tools/mkrun -n 2 --timeout 120 env MK_TIMEOUT_MS=500 build/bin/mk_dist_tests --abort-scenario")
for i in "${!two_gpu_steps[@]}"; do
  step=${two_gpu_steps[i]}
  if [ "${ngpu:-0}" -ne 1 ]; then run $step  # (word-split on purpose: no argument holds a space)
  elif [ "$i" -lt 2 ]; then echo "=== SKIPPED (needs 2 GPUs; nvidia-smi lists 1; shared-GPU steps below): $step"
  elif [[ $step == *--abort-scenario ]]; then
    echo "=== SKIPPED (needs 2 GPUs: with the ranks sharing one, the driver does not end one trapped kernel): $step"
  fi
done
if [ "${ngpu:-0}" -eq 1 ]; then
  run tools/mkrun -n 2 --timeout 230 env MK_SYMM_MODE=ipc $share build/bin/mk_dist_tests \
      --gtest_filter='Dist.Symmetric*:Dist.Mismatched*:AgGemm*:GemmRs*'
fi
# A rank whose device failed releases a plan's network region, its signal
# words and its communicator without waiting for its peer (which comes 8 s
# later), and the peer's own release does not wait for it while it keeps its
# communicator 12 s more; 2 nodes; on one GPU the ranks share it.
step_s=60 run tools/mkrun -n 2 --timeout 50 env MK_RANKS_PER_NODE=1 $share build/bin/mk_dist_tests \
    --failed-teardown-scenario
# 2 nodes x 2 GPUs (the two-level paths: NVLink inside a node, emu between
# nodes) as 4 ranks on 2 GPUs: ranks 0,1 (node 0) and 2,3 (node 1) on GPUs
# 0,1, so rail peers share a GPU (MK_SHARE_GPUS, time-sliced: correctness
# only, long wait bounds).
# emu with 3 delivery agent CTAs a kernel (MK_EMU_AGENTS): a write's chunks
# split over the agents of one kernel, the ops' grids leaving 3 SMs (2x1; the
# ranks share the GPU when there is one).
run tools/mkrun -n 2 --timeout 230 env MK_RANKS_PER_NODE=1 MK_EMU_AGENTS=3 $share build/bin/mk_dist_tests \
    --gtest_filter='Net.*:AgGemm*:GemmRs*:GemmAr*:GemmPeer*:RingAttn*'
# Two proxy threads a rank (MK_NET_THREADS=2: the kernels' puts spread over two queues, whose emulated NIC is one
# link of the GPU's) across 2 nodes.
run tools/mkrun -n 2 --timeout 150 env MK_RANKS_PER_NODE=1 MK_NET_THREADS=2 $share build/bin/mk_dist_tests \
    --gtest_filter='Net.Puts*:Net.Small*:Net.Deregistering*:GemmRs*'
# The infrastructure tests that finish when ranks time-slice a GPU (the
# round-trip-bound ones, ping-pong and acked small puts, take minutes then
# and stay with the tiers above): topology, symmetric memory, network puts.
shared_infra='Dist.Topology*:Dist.Symmetric*:Dist.Mismatched*:Net.Puts*'

if [ "${ngpu:-0}" -ge 2 ]; then
  step_s=420 run tools/mkrun -n 4 --timeout 410 env MK_RANKS_PER_NODE=2 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
      build/bin/mk_dist_tests --gtest_filter="AgGemm*:GemmRs*:GemmAr*:$shared_infra"
fi
# One GPU: the dist tier's op tests with the ranks sharing it (MK_SHARE_GPUS,
# time-sliced: correctness only; not the 100k-round ping-pong, which takes
# minutes that way): 1x2, 2x1 (emu, the whole tier) and 2x2 (4 ranks).
if [ "${ngpu:-0}" -eq 1 ]; then
  run tools/mkrun -n 2 --timeout 230 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests \
      --gtest_filter="AgGemm*:GemmRs*:GemmAr*:GemmPeer*:$shared_infra"
  run tools/mkrun -n 2 --timeout 230 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests
  run tools/mkrun -n 4 --timeout 230 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=2 build/bin/mk_dist_tests \
      --gtest_filter="AgGemm*:GemmRs*:GemmAr*:$shared_infra"
  # One node of 4 (issue [multi-gpu-run]'s 1x4; 1x8, 2x4: bench/results/multi-gpu-share1gpu-20261201.md).
  run tools/mkrun -n 4 --timeout 230 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=4 \
      build/bin/mk_dist_tests --gtest_filter='-Dist.PingPong*'
fi
fi  # compiled
# The TP benchmarks' own checks, not their times: mkbench --quick (M = 4096) checks both fused plans and every
# overlap baseline (each chunk count) against serial before it times, and across nodes compares the proxies'
# network bytes with each op's formula. On 2+ GPUs as 1x2 (NCCL baselines) and 2x1 emu; on one GPU with the
# ranks sharing it (mkbench's shared-GPU mode: mkernel's collectives as baselines, a host barrier) as 1x2, 2x1,
# 2x2 and 1x4. Reports go to a temporary folder (they are no measurements).
if want bench; then skip_rule bench
  if [ -x build/bin/mkbench ]; then
    tp_benches="--quick --iters 3 --warmup 1 ag_gemm gemm_rs gemm_ar"
    if ! bench_out=$(mktemp -d /tmp/mk_gpu_test_bench.XXXXXX); then
      echo "=== FAILED: bench: no temporary folder for the reports (mktemp -d)"; fail=1
    elif [ "${ngpu:-0}" -ge 2 ]; then
      run tools/mkrun -n 2 --timeout 200 env MK_BENCH_OUT="$bench_out" build/bin/mkbench $tp_benches
      run tools/mkrun -n 2 --timeout 200 env MK_RANKS_PER_NODE=1 MK_BENCH_OUT="$bench_out" build/bin/mkbench $tp_benches
    elif [ "${ngpu:-0}" -eq 1 ]; then
      for layout in 2:2 2:1 4:2 4:4; do  # ranks:ranks per node (1x2, 2x1 emu, 2x2 emu, 1x4)
        run tools/mkrun -n "${layout%:*}" --timeout 200 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 \
            MK_RANKS_PER_NODE="${layout#*:}" MK_BENCH_OUT="$bench_out" build/bin/mkbench $tp_benches
      done
    else
      skip_or_fail bench "the TP benchmarks' checks (no GPU: nvidia-smi lists ${ngpu:-0})"
    fi
    [ -n "${bench_out:-}" ] && rm -rf "$bench_out"
  else
    skip_or_fail bench "the TP benchmarks' checks (no build/bin/mkbench: carry build/bin)"
  fi
fi  # bench
if want python; then skip_rule python
# The tests' Python (tools/test_python.sh: .venv-test's where tools/setup_test_python.sh made it, else python3, which
# on the GPU machine has torch), and torchrun as its module: no torchrun on PATH needed.
py=$(tools/test_python.sh)
torchrun=("$py" -m torch.distributed.run)
has_torchrun=; timeout -k 5 120 "$py" -c 'import torch.distributed.run' >/dev/null 2>&1 && has_torchrun=1
# The torch ops from Python (the in-tree package against this build's library).
run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" "$py" -m pytest -q -rs -p no:cacheprovider \
    tests/python/gpu
# Ring attention on a communicator of one rank: the ring kernel over the whole sequence, with no gathered
# buffer (the TP ops' one-rank paths: mk_gpu_tests' TpSingleRank*).
if [ -n "$has_torchrun" ] && [ "${ngpu:-0}" -ge 1 ]; then
  step_s=150 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" \
      "${torchrun[@]}" --standalone --nproc_per_node=1 tests/python/gpu/dist_ring_attn_check.py
fi
# The tensor-parallel ops from Python and the TP MLP example, under torchrun.
if [ -n "$has_torchrun" ] && [ "${ngpu:-0}" -ge 2 ]; then
  for script in tests/python/gpu/dist_tp_check.py tests/python/gpu/dist_ring_attn_check.py examples/tp_mlp.py \
                examples/ring_attention.py; do
    run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" \
        "${torchrun[@]}" --standalone --nproc_per_node=2 "$script"
  done
  # The TP ops from Python across 2 emulated nodes (on a side stream: README, Network).
  run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_RANKS_PER_NODE=1 \
      "${torchrun[@]}" --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
  # Ring attention across 2 emulated nodes (the emu transport between them),
  # and as 2 nodes x 2 GPUs on the 2 GPUs (shared, time-sliced: the NVLink
  # forwarding of chunks that came over the network).
  run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_RANKS_PER_NODE=1 \
      "${torchrun[@]}" --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
  step_s=200 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_RANKS_PER_NODE=2 \
      MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${torchrun[@]}" --standalone --nproc_per_node=4 \
        tests/python/gpu/dist_ring_attn_check.py
  # A peer that never calls: the ring op ends with an error naming the wait, not a hang.
  step_s=120 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_TIMEOUT_MS=1000 \
      "${torchrun[@]}" --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_timeout.py
elif [ -n "$has_torchrun" ] && [ "${ngpu:-0}" -eq 1 ]; then
  # One GPU: 2 ranks share it (MK_SHARE_GPUS, time-sliced: correctness only,
  # long wait bounds).
  echo "=== one GPU: the torchrun checks as 2 ranks sharing it (the 2-GPU tier needs 2 GPUs)"
  for script in tests/python/gpu/dist_tp_check.py tests/python/gpu/dist_ring_attn_check.py examples/tp_mlp.py \
                examples/ring_attention.py; do
    step_s=200 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 \
        MK_TIMEOUT_MS=60000 "${torchrun[@]}" --standalone --nproc_per_node=2 "$script"
  done
  step_s=200 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_RANKS_PER_NODE=1 \
      MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 "${torchrun[@]}" --standalone --nproc_per_node=2 \
        tests/python/gpu/dist_ring_attn_check.py
  step_s=120 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 \
      MK_TIMEOUT_MS=1000 "${torchrun[@]}" --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_timeout.py
  # The TP ops from Python on one node of 4, after the 2-rank run above traced
  # the same graphs: torch.compile's on-disk cache must not serve those to 4
  # ranks (it did before the communicator key carried the world size).
  step_s=200 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 \
      MK_TIMEOUT_MS=60000 "${torchrun[@]}" --standalone --nproc_per_node=4 tests/python/gpu/dist_tp_check.py
  # The TP ops from Python across 2 emulated nodes (on a side stream: README, Network).
  step_s=200 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" MK_SHARE_GPUS=1 \
      MK_RANKS_PER_NODE=1 MK_TIMEOUT_MS=60000 "${torchrun[@]}" --standalone --nproc_per_node=2 \
        tests/python/gpu/dist_tp_check.py
elif [ -z "$has_torchrun" ]; then
  skip_or_fail python "tensor-parallel ops from Python (no torch.distributed.run in $py)"
else
  skip_or_fail python "tensor-parallel ops from Python (need a GPU; nvidia-smi lists ${ngpu:-0})"
fi
fi  # python
# The network over libfabric (tcp;ofi_rxm on loopback, GPU memory staged
# through pinned host buffers by the kernels' delivery agent): the network
# tests and the TP ops across 2 nodes (on one GPU the ranks share it); the
# same with the proxy's CUDA copies staging instead (MK_FABRIC_STAGE=cuda,
# the path of EFA's signals); then the TP ops' back-to-back calls with one
# hardware work queue, which stop when the proxy stages with CUDA copies
# (by design: the README's "Hardware work queues"), so agent staging. Needs
# libfabric.so.1 on the loader path, or its .so files carried in .carry/rdma
# (tools/carry_rdma.sh).
if want fabric; then skip_rule fabric
if [ -d .carry/rdma ]; then export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
if ! has_backend fabric; then
  skip_or_fail fabric "fabric on GPUs (build/lib/libmkernel.so was built without the fabric backend: MK_NET_BACKENDS)"
elif grep -q libfabric.so.1 <(ldconfig -p 2>/dev/null) || [ -f .carry/rdma/libfabric.so.1 ]; then
  run tools/mkrun -n 2 --timeout 230 env MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" $share \
      build/bin/mk_dist_tests --gtest_filter='Net*:AgGemm*:GemmRs*:GemmAr*'
  run tools/mkrun -n 2 --timeout 230 env MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" \
      MK_FABRIC_STAGE=cuda $share build/bin/mk_dist_tests --gtest_filter='Net*:AgGemm*:GemmRs*:GemmAr*'
  step_s=60 run tools/mkrun -n 2 --timeout 55 env MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" \
      $share CUDA_DEVICE_MAX_CONNECTIONS=1 MK_TIMEOUT_MS=5000 MK_NET_TIMEOUT_MS=5000 build/bin/mk_dist_tests \
      --gtest_filter='AgGemmTest.HundredBackToBackCallsWithChangingInputs:GemmRsTest.HundredBackToBackCallsWithChangingInputs'
else
  skip_or_fail fabric "fabric on GPUs (no libfabric.so.1 here; carry it in .carry/rdma: tools/carry_rdma.sh)"
fi
fi  # fabric
# The network over verbs with no RDMA NIC: softverbs (tests/cpu/softverbs/, the
# CPU tier's stand-in for libibverbs and libefa) carries GPU memory through
# the CUDA driver. The network tests and the TP ops across 2 nodes over RC
# QPs (Add signals as atomics into GPU memory), then over EFA SRD
# (SOFTVERBS_EFA=1: signals applied by the kernels' delivery agents), then
# with GPU memory registered by DMA-BUF only. Written in sessions 37-38
# without a GPU; first passed on one H200 in session 38 (bench/results/raw-20261205/s38/b/).
if want verbs; then skip_rule verbs
if ! has_backend verbs; then
  skip_or_fail verbs "verbs on GPUs (build/lib/libmkernel.so was built without the verbs backend: MK_NET_BACKENDS)"
elif [ -f build/softverbs/libibverbs.so.1 ]; then
  # (a copy may have made the link a file: libefa.so.1 must be the same library, not a second one)
  [ build/softverbs/libefa.so.1 -ef build/softverbs/libibverbs.so.1 ] ||
    ln -sf libibverbs.so.1 build/softverbs/libefa.so.1 || { echo "=== FAILED: cannot link build/softverbs/libefa.so.1"; fail=1; }
  sv="LD_LIBRARY_PATH=$PWD/build/softverbs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # softverbs' copies into GPU memory run on streams of the proxy's thread, which mkernel does not know
  # of: more hardware queues keep them off the queues of the ops' streams (README, "Hardware work queues").
  sv="$sv CUDA_DEVICE_MAX_CONNECTIONS=32"
  run tools/mkrun -n 2 --timeout 230 env $sv MK_RANKS_PER_NODE=1 MK_NET=verbs $share \
      build/bin/mk_dist_tests --gtest_filter='Net*:AgGemm*:GemmRs*:GemmAr*'
  run tools/mkrun -n 2 --timeout 230 env $sv SOFTVERBS_EFA=1 MK_RANKS_PER_NODE=1 MK_NET=verbs $share \
      build/bin/mk_dist_tests --gtest_filter='Net*:AgGemm*:GemmRs*:GemmAr*'
  # GPU memory by DMA-BUF only (SOFTVERBS_NO_PEERMEM=1: a host without nvidia-peermem), the path a
  # NIC takes first: cuMemGetHandleForAddressRange on the symmetric heap's memory, the offset/iova
  # pairing checked by softverbs. A failure saying "registered by address" is impossible here; one
  # naming cuMemGetHandleForAddressRange means this GPU or driver exports no DMA-BUF.
  run tools/mkrun -n 2 --timeout 120 env $sv SOFTVERBS_NO_PEERMEM=1 MK_RANKS_PER_NODE=1 MK_NET=verbs $share \
      build/bin/mk_dist_tests --gtest_filter='Net*:AgGemmTest.MatchesReferenceAcrossShapes'
  # A slow wire (every WR leaves 300 ms after its post): deregistering a region waits until the proxy completed
  # every command the kernels pushed (else the late WR meets a gone registration: a protection error).
  run tools/mkrun -n 2 --timeout 120 env $sv SOFTVERBS_WIRE_DELAY_MS=300 MK_RANKS_PER_NODE=1 MK_NET=verbs $share \
      build/bin/mk_dist_tests --gtest_filter='Net.DeregisteringWaitsForEveryPushedCommand'
  # A node whose NIC lacks remote atomics (rank 1's): every rank's network() fails at once naming rank 1 and why,
  # none left waiting in the set-up's exchanges until the bootstrap bound.
  step_s=60 run tools/mkrun -n 2 --timeout 50 env $sv SOFTVERBS_LACKS=atomics SOFTVERBS_LACKS_RANK=1 \
      MK_RANKS_PER_NODE=1 MK_NET=verbs $share build/bin/mk_dist_tests --net-open-refused-scenario
else
  skip_or_fail verbs "verbs on GPUs (no build/softverbs/libibverbs.so.1: carry build/softverbs)"
fi
fi  # verbs
exit $fail
