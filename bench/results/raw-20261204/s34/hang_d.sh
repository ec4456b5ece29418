# call D (session 34): call C's one-queue step (fabric, MK_FABRIC_STAGE=cuda, CUDA_DEVICE_MAX_CONNECTIONS=1,
# MK_TIMEOUT_MS=5000) again ran past mkrun's 55 s: rank 1 timed out at 5 s, released without waiting (781efb1) and
# went on to the next test; rank 0 said nothing. 1: only the AgGemm test, lines time-stamped, so the rank that fails
# first exits (and frees its context) at once: does the other rank then hear of its own kernel's end?
# 2: synccheck over the dist tier's 6 op tests, 1x2 and 2x1 emu (never run). Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/d
source tools/gpu_env.sh
ts() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%3N)" "$l"; done; }
(
export LD_LIBRARY_PATH="$PWD/.carry/rdma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MK_FABRIC_STAGE=cuda
date +%s.%3N
tools/mkrun -n 2 --timeout 45 env MK_RANKS_PER_NODE=1 MK_NET=fabric "MK_FI_PROVIDER=tcp;ofi_rxm" MK_SHARE_GPUS=1 \
  CUDA_DEVICE_MAX_CONNECTIONS=1 MK_TIMEOUT_MS=5000 MK_NET_TIMEOUT_MS=5000 stdbuf -oL -eL build/bin/mk_dist_tests \
  --gtest_filter=AgGemmTest.HundredBackToBackCallsWithChangingInputs 2>&1 | ts > $OUT/d/one_test.log &
sleep 15; nvidia-smi --query-compute-apps=pid,used_memory --format=csv > $OUT/d/smi_15.txt 2>&1
sleep 15; nvidia-smi --query-compute-apps=pid,used_memory --format=csv > $OUT/d/smi_30.txt 2>&1
wait
)
grep -v '^\S* \[New' $OUT/d/one_test.log | cut -c1-400 | tail -25
cat $OUT/d/smi_*.txt
SANITIZE_STEP_S=130 tools/sanitize_gpu.sh synccheck $OUT/d/san dist emu
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
