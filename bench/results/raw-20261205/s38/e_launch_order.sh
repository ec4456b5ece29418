# call E (session 38): LaunchOrder made cheaper (one capture query and one stream id a call, end() reusing
# begin()'s): its tests on 1x2 and 2x1 emu (ranks sharing the GPU), the graph and back-to-back tests, the
# one-GPU plan tests, then the host cost per call again (call D is the before).
mkdir -p $OUT/e
source tools/gpu_env.sh; source tools/gpu_steps.sh; out=$OUT
f='*CallsOnTwoStreams*:*CudaGraph*:*HundredBackToBack*:*AlternatingEntryPoints*'
logged 200 e/dist-1x2.log tools/mkrun -n 2 --timeout 190 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 build/bin/mk_dist_tests --gtest_filter="$f"
logged 200 e/dist-2x1.log tools/mkrun -n 2 --timeout 190 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_RANKS_PER_NODE=1 build/bin/mk_dist_tests --gtest_filter="$f"
logged 60 e/gpu-tp.log build/bin/mk_gpu_tests --gtest_filter='TpSingleRank*:Gemm.*'
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 150 torchrun --standalone --nproc_per_node=1 bench/python_overhead.py --out $OUT/e > $OUT/e/python_overhead.log 2>&1
echo "python_overhead rc=$?"; grep -h "C ABI\|eager, validated\|gemm_ptr" $OUT/e/python_overhead.log | head -24
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
