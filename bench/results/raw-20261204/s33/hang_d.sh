# call D (session 33): call C's second step (fabric, MK_FABRIC_STAGE=cuda, CUDA_DEVICE_MAX_CONNECTIONS=1,
# MK_TIMEOUT_MS=5000) ran past its 5 s bounds until mkrun's 55 s. Where do the ranks wait? Only the AgGemm test,
# gtest's output line-buffered, host stacks of both ranks at 25 s and 45 s (cuda-gdb attaches; no gdb there).
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/d
source tools/gpu_env.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MK_FABRIC_STAGE=cuda MK_LOG=info
tools/mkrun -n 2 --timeout 75 env MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" MK_SHARE_GPUS=1 \
  CUDA_DEVICE_MAX_CONNECTIONS=1 MK_TIMEOUT_MS=5000 MK_NET_TIMEOUT_MS=5000 stdbuf -oL -eL build/bin/mk_dist_tests \
  --gtest_filter=AgGemmTest.HundredBackToBackCallsWithChangingInputs > $OUT/d/run.log 2>&1 &
runpid=$!
for t in 25 45; do
  sleep $((t == 25 ? 25 : 20))
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv > $OUT/d/smi_$t.txt 2>&1
  for pid in $(pgrep -x mk_dist_tests); do
    timeout 25 cuda-gdb -p $pid -batch -ex "info threads" -ex "thread apply all bt 25" > $OUT/d/bt_${t}_$pid.txt 2>&1 &
  done
  wait $(jobs -p | grep -v "^$runpid$") 2>/dev/null
done
wait $runpid; echo "mkrun rc=$?"
tail -30 $OUT/d/run.log
for f in $OUT/d/bt_*; do echo "== $f"; grep -c . $f; grep -E "^#[0-9]+ .* in (mk::|cuda|cu[A-Z]|fi_|std::this_thread|nanosleep|poll|pthread_cond)" $f | head -12; done
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
