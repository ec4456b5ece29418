#!/usr/bin/env bash
# Session 22 (1 GPU, ~3 minutes): does a highest-priority stream for emu's proxy keep its copies and memory ops out of
# the user's hardware work queue? GemmAr's 2x1 emu tests (the 100 back-to-back calls queue copies and kernels behind
# each op) with .carry/lib_diag (the stall report only) and .carry/lib_prio (the same + the proxy's stream at the
# greatest priority): time-sliced with CUDA_DEVICE_MAX_CONNECTIONS=1 (every stream in one work queue; lib_diag
# stalled there, s22_mps_queue.sh), and under MPS 50% (lib_diag stalled 3 of 3, s22_mps_side.sh).
# The libraries: .carry/lib_diag is this session's tree with Transport::in_flight and emu's stage word (as committed);
# .carry/lib_prio the same with emu's stream made by cudaStreamCreateWithPriority(.., greatest) (not kept).
# Carry build/bin, build/lib, .carry. Logs to $OUT/prio.tgz.
cd "$(dirname "$0")/../../.."
source tools/gpu_env.sh
R=$OUT/prio; mkdir -p $R
el() { echo "[$(date +%T)] $*"; }
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1
t() {  # name lib repeat [env...]
  local name=$1 lib=$PWD/.carry/$2 rep=$3; shift 3
  timeout 100 tools/mkrun -n 2 --timeout 95 env LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-} "$@" build/bin/mk_dist_tests \
    --gtest_filter='GemmAr*' --gtest_repeat=$rep > $R/$name.log 2>&1
  el "$name: rc=$? $(grep -c '^\[       OK \]' $R/$name.log) OK, $(grep -c '^\[  FAILED  \].*ms)' $R/$name.log) FAILED"
  grep -o "emu: batch.*" $R/$name.log | head -1
}
t conn1_prio lib_prio 1 CUDA_DEVICE_MAX_CONNECTIONS=1
t conn1_prio_rep3 lib_prio 3 CUDA_DEVICE_MAX_CONNECTIONS=1
source tools/mps_daemon.sh  # (as run: the same steps written out here; moved to the helper afterwards)
trap 'mps_stop; tar czf $OUT/prio.tgz -C $OUT prio && rm -rf $R' EXIT
mps_start || exit 1
export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
t mps_prio_1 lib_prio 3
t mps_diag lib_diag 3
t mps_prio_2 lib_prio 3
t mps_diag_conn32 lib_diag 3 CUDA_DEVICE_MAX_CONNECTIONS=32
t mps_prio_3 lib_prio 3
