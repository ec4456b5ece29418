# call E (session 33): call D showed rank 0's kernel timing out (5 s) and rank 1 in cudaStreamSynchronize past 60 s
# with no timeout of its own. Which kernel does rank 1's GPU run, and where? cuda-gdb attaches at 22 s and lists the
# running kernels and the blocks' PCs on both ranks. Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/e
source tools/gpu_env.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MK_FABRIC_STAGE=cuda MK_LOG=info
tools/mkrun -n 2 --timeout 50 env MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" MK_SHARE_GPUS=1 \
  CUDA_DEVICE_MAX_CONNECTIONS=1 MK_TIMEOUT_MS=5000 MK_NET_TIMEOUT_MS=5000 stdbuf -oL -eL build/bin/mk_dist_tests \
  --gtest_filter=AgGemmTest.HundredBackToBackCallsWithChangingInputs > $OUT/e/run.log 2>&1 &
runpid=$!
sleep 22
nvidia-smi > $OUT/e/smi.txt 2>&1
for pid in $(pgrep -x mk_dist_tests); do
  timeout 25 cuda-gdb -p $pid -batch -ex "info cuda kernels" -ex "info cuda blocks" -ex "info cuda warps" \
    -ex "bt" -ex "x/12i \$pc-64" -ex "info cuda devices" -ex "thread apply 1 bt 14" > $OUT/e/cg_$pid.txt 2>&1 &
done
sleep 26
wait $runpid; echo "mkrun rc=$?"
grep -v '^\[New' $OUT/e/run.log | tail -12
for f in $OUT/e/cg_*; do echo "== $f"; grep -v '^\[New\|^\[Thread\|libcudadebugger\|^$' $f | head -60; done
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
