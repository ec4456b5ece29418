# call F (session 43): the plans' one-host-thread guard (LaunchOrder's busy flag: every plan call begins and ends a
# span through it) on one GPU: mk_gpu_tests, the dist TP tests with 2 ranks sharing the GPU, the torch ops' GPU
# tests. Carries build/bin build/lib.
mkdir -p $OUT/f
source tools/gpu_env.sh
timeout --foreground 120 build/bin/mk_gpu_tests > $OUT/f/mk_gpu_tests.log 2>&1; echo "mk_gpu_tests rc=$?"
grep -h "PASSED\|FAILED" $OUT/f/mk_gpu_tests.log | head -8
MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 150 tools/mkrun -n 2 --timeout 140 build/bin/mk_dist_tests \
  --gtest_filter='AgGemm*:GemmRs*:GemmAr*:RingAttn*' > $OUT/f/dist_1x2.log 2>&1; echo "dist 1x2 rc=$?"
grep -h "PASSED\|FAILED" $OUT/f/dist_1x2.log | head -8
PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so timeout --foreground 150 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/gpu > $OUT/f/pytest_gpu.log 2>&1; echo "pytest gpu rc=$?"; tail -2 $OUT/f/pytest_gpu.log
tar czf $OUT/f-out.tgz -C $OUT f; rm -rf $OUT/f
