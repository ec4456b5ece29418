# call D' (session 42): call D cut to the budget left (~90 s of run): mk_gpu_tests (TpSingleRank's refused-sync
# message with MK_DEVICE_SYNC), the torch ops' GPU tests (gemm's new fast path), one python_overhead.py run of this
# package. Carries build/bin build/lib.
mkdir -p $OUT/d
source tools/gpu_env.sh
timeout --foreground 60 build/bin/mk_gpu_tests > $OUT/d/mk_gpu_tests.log 2>&1; echo "mk_gpu_tests rc=$?"
grep -h "PASSED\|FAILED" $OUT/d/mk_gpu_tests.log | head -8
PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so timeout --foreground 60 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/gpu/test_ops_gpu.py > $OUT/d/pytest_ops.log 2>&1; echo "pytest test_ops_gpu rc=$?"; tail -2 $OUT/d/pytest_ops.log
PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so timeout 45 python3 bench/python_overhead.py --out $OUT/d/head \
  > $OUT/d/head.log 2>&1; echo "python_overhead rc=$?"; grep "^| " $OUT/d/head.log | head -12
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
