#!/usr/bin/env bash
# Probe: two ranks running at once on one GPU through a private MPS daemon (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
# each), instead of time-slicing. Ring attention traces (2x1 emu and 1x2) at small S, then the dist suite.
source tools/gpu_env.sh
R=$OUT/c1; mkdir -p $R; T0=$(date +%s)
exec > >(tee $R/all.log) 2>&1
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
nvidia-smi --query-gpu=name,compute_mode,driver_version,clocks.sm --format=csv
command -v nvidia-cuda-mps-control || { echo "no nvidia-cuda-mps-control"; tar czf $OUT/c1.tgz -C $OUT c1; exit 0; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mkmps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mkmps/log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d; el "mps daemon rc=$?"
cleanup() { echo quit | nvidia-cuda-mps-control; sleep 2; cp -r /tmp/mkmps/log $R/mpslog; tar czf $OUT/c1.tgz -C $OUT c1; }
trap cleanup EXIT
for p in 100 50; do
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$p timeout 60 python3 -c \
    "import torch; p=torch.cuda.get_device_properties(0); print('pct $p sms', p.multi_processor_count)"
done
SMS=$(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 timeout 60 python3 -c \
  "import torch; print(torch.cuda.get_device_properties(0).multi_processor_count)" 2>/dev/null | tail -1)
el "sms at 50%: $SMS"
CTAS=0; [ "$SMS" = "132" ] && CTAS=64
export MK_SHARE_GPUS=1 MK_TIMEOUT_MS=20000 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
for rpn in 1 2; do for s in 2048 8192; do
  el "ring_trace rpn=$rpn S=$s"
  MK_RANKS_PER_NODE=$rpn timeout 120 torchrun --standalone --nproc_per_node=2 tools/ring_trace.py --batch 1 --seq $s \
    --kv-heads 8 --calls 5 --ctas $CTAS --chunks 8 > $R/trace_rpn${rpn}_s$s.log 2>&1
  el "rc=$?"; grep -E "traced call|kernel:|post" $R/trace_rpn${rpn}_s$s.log | head -12
done; done
if [ "$CTAS" = "0" ]; then
  for rpn in 2 1; do
    el "mk_dist_tests rpn=$rpn (MPS, concurrent)"
    timeout 200 tools/mkrun -n 2 --timeout 190 env MK_RANKS_PER_NODE=$rpn build/bin/mk_dist_tests > $R/dist_rpn$rpn.log 2>&1
    el "rc=$?"; grep -E "PASSED|FAILED|tests ran" $R/dist_rpn$rpn.log | head -20
  done
fi
el done
