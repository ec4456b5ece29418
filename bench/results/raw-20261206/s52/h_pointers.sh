# call H (session 52): the raw-pointer and stream checks of the TP ops (src/runtime/device_pointer.cpp): the GPU
# tests (new TpSingleRank.PointersThatAreNotThisGpusMemoryAreRefusedBeforeAnyLaunch, both modes), the TP dist tests
# 1x2 and 2x1 emu sharing the GPU, the Python GPU tests with PyTorch's expandable segments (VMM memory, several
# mappings a segment) and the torchrun TP check. Carries build/bin build/lib.
mkdir -p $OUT/h; source tools/gpu_env.sh; export MK_TIMEOUT_MS=60000
f='AgGemm*:GemmRs*:GemmAr*:GemmPeer*'
timeout 90 build/bin/mk_gpu_tests > $OUT/h/gpu.log 2>&1; echo "mk_gpu_tests rc=$?"; tail -3 $OUT/h/gpu.log
grep -h "Pointers.*OK\|Pointers.*FAILED" $OUT/h/gpu.log
timeout 90 tools/mkrun -n 2 --timeout 85 env MK_SHARE_GPUS=1 build/bin/mk_dist_tests --gtest_filter=$f \
  > $OUT/h/d1x2.log 2>&1; echo "1x2 rc=$?"; grep -h "PASSED  \]\|FAILED  \]" $OUT/h/d1x2.log | sort | uniq -c
timeout 100 tools/mkrun -n 2 --timeout 95 env MK_SHARE_GPUS=1 MK_RANKS_PER_NODE=1 MK_EMU_AGENTS=3 \
  build/bin/mk_dist_tests --gtest_filter=$f > $OUT/h/d2x1.log 2>&1; echo "2x1 rc=$?"
grep -h "PASSED  \]\|FAILED  \]" $OUT/h/d2x1.log | sort | uniq -c
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so \
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/python/gpu > $OUT/h/py.log 2>&1
echo "pytest (expandable segments) rc=$?"; tail -2 $OUT/h/py.log
PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so MK_SHARE_GPUS=1 timeout 100 \
  torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py > $OUT/h/tp.log 2>&1
echo "torchrun dist_tp_check rc=$?"; tail -2 $OUT/h/tp.log
grep -h "must be device memory\|FAILED\|Error" $OUT/h/*.log | sort | uniq -c | sort -rn | head -8 | cut -c1-250
tar czf $OUT/h-out.tgz -C $OUT h; rm -rf $OUT/h
