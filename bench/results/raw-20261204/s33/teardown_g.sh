# call G (session 33): the tree with Network::deregister_buffer and SignalLease leaving out their barriers on a
# failed device (uncommitted at the call; committed after it). 1: the new --failed-teardown-scenario (2x1, ranks share
# the GPU), emu and fabric with CUDA staging; 2: call D's run again (fabric, MK_FABRIC_STAGE=cuda,
# CUDA_DEVICE_MAX_CONNECTIONS=1), with the ranks' lifetimes every 5 s; 3: the fabric 2x1 op tests (normal teardown).
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/g
source tools/gpu_env.sh; source tools/gpu_steps.sh
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
S="MK_RANKS_PER_NODE=1 MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000"
step_s=60 run tools/mkrun -n 2 --timeout 50 env $S build/bin/mk_dist_tests --failed-teardown-scenario
step_s=60 run tools/mkrun -n 2 --timeout 50 env $S MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" MK_FABRIC_STAGE=cuda \
  build/bin/mk_dist_tests --failed-teardown-scenario
echo "=== call D's run again"
t0=$(date +%s)
tools/mkrun -n 2 --timeout 100 env MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" MK_SHARE_GPUS=1 \
  MK_FABRIC_STAGE=cuda CUDA_DEVICE_MAX_CONNECTIONS=1 MK_TIMEOUT_MS=5000 MK_NET_TIMEOUT_MS=5000 stdbuf -oL -eL \
  build/bin/mk_dist_tests --gtest_filter=AgGemmTest.HundredBackToBackCallsWithChangingInputs > $OUT/g/repro.log 2>&1 &
runpid=$!
while kill -0 $runpid 2>/dev/null; do
  echo "t=$(( $(date +%s) - t0 )) s: ranks alive: $(pgrep -x mk_dist_tests | tr '\n' ' ')"; sleep 5
done
wait $runpid; echo "mkrun rc=$? after $(( $(date +%s) - t0 )) s"
grep -v '^\[New' $OUT/g/repro.log | grep -v "^Note\|^\[==\|^\[--\|Global test" | tail -14
step_s=120 run tools/mkrun -n 2 --timeout 110 env $S MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" \
  build/bin/mk_dist_tests --gtest_filter='Net*:AgGemm*:GemmRs*:GemmAr*' > $OUT/g/fabric.log 2>&1
grep -h '^=== [PFS]' $OUT/g/fabric.log
tar czf $OUT/g-out.tgz -C $OUT g; rm -rf $OUT/g
