#!/usr/bin/env bash
# Session 21: GemmAr's dist tests as 2x1 emu under a private MPS daemon (50% each), 3 repeats, with the old
# library (.carry/ar_t: push and Reduce CTAs by index) and the new one (build/: claimed items), alternating,
# to tell whether s21_rs_claims.sh's one failure (an emu PUT not complete in run()) is the change or the
# known emu-under-MPS hazard. Logs to $OUT/mps_ar.tgz.
cd "$(dirname "$0")/../../.."
source tools/gpu_env.sh
R=$OUT/mps_ar; mkdir -p $R
dir=$(mktemp -d /tmp/mk_mps.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
trap 'echo quit | timeout 10 nvidia-cuda-mps-control; sleep 1; rm -rf $dir; tar czf $OUT/mps_ar.tgz -C $OUT mps_ar && rm -rf $R' EXIT
nvidia-cuda-mps-control -d || exit 1
export CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 MK_RANKS_PER_NODE=1
for i in 1 2; do
  for v in new old; do
    bin=build/bin/mk_dist_tests; lib=$PWD/build/lib
    [ $v = old ] && bin=.carry/ar_t/mk_dist_tests && lib=$PWD/.carry/ar_t
    echo "[$(date +%T)] $v $i"
    timeout 45 tools/mkrun -n 2 --timeout 40 env LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-} $bin \
      --gtest_filter='GemmAr*' --gtest_repeat=2 > $R/${v}_$i.log 2>&1
    echo "rc=$? $(grep -c '^\[       OK \]' $R/${v}_$i.log) OK, $(grep -c '^\[  FAILED  \].*ms)' $R/${v}_$i.log) FAILED; $(grep -m1 -o 'not complete after [0-9]* ms' $R/${v}_$i.log)"
  done
done
