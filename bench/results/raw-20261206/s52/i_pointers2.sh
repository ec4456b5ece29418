# call I (session 52): call H again after the stream check skips capturing streams (cudaStreamGetDevice refused
# there, invalidating the capture): the GPU tests, the TP dist tests 1x2 sharing the GPU, the torchrun TP check.
mkdir -p $OUT/i; source tools/gpu_env.sh; export MK_TIMEOUT_MS=60000
timeout 60 build/bin/mk_gpu_tests > $OUT/i/gpu.log 2>&1; echo "mk_gpu_tests rc=$?"; tail -2 $OUT/i/gpu.log
timeout 70 tools/mkrun -n 2 --timeout 65 env MK_SHARE_GPUS=1 build/bin/mk_dist_tests \
  --gtest_filter='AgGemm*:GemmRs*:GemmAr*' > $OUT/i/d1x2.log 2>&1; echo "1x2 rc=$?"
grep -h "PASSED  \]\|FAILED  \]" $OUT/i/d1x2.log | sort | uniq -c | head -6
PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so MK_SHARE_GPUS=1 timeout 80 \
  torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py > $OUT/i/tp.log 2>&1
echo "torchrun dist_tp_check rc=$?"; grep -h "stream\|Error" $OUT/i/*.log | sort | uniq -c | sort -rn | head -5 | cut -c1-200
tar czf $OUT/i-out.tgz -C $OUT i; rm -rf $OUT/i
