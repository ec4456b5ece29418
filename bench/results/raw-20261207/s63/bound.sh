# Session 63, call E: the plan-cache bound's exchange (mk_comm_allgather) on one GPU: the C ABI test on one rank,
# then tools/gpu_test.sh python whole (dist_tp_check.py, with 2 and 4 ranks sharing the GPU and 2x1 emu, now checks
# that the bound closes a captured plan whose graph is gone on every rank). Bounded; ~5 min.
set -u
source tools/gpu_env.sh
timeout 60 build/bin/mk_gpu_tests --gtest_filter='CApiGpu.*' > $OUT/capi.log 2>&1; echo "capi rc=$?"
grep -E '^\[ +(OK|FAILED) +\]|PASSED' $OUT/capi.log | cut -c1-160
tools/gpu_test.sh python > $OUT/python.log 2>&1; rc=$?
grep -E '^=== (PASSED|FAILED|SKIPPED)' $OUT/python.log | sed 's/PYTHONPATH=[^ ]* MK_LIBRARY=[^ ]* //' | cut -c1-170
echo "RuntimeWarning lines: $(grep -c RuntimeWarning $OUT/python.log)"
echo "gpu_test.sh python rc=$rc"
