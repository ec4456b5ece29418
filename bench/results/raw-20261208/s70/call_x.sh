# Session 70, experiment: at D = 64 part of the softmax's exp2 on the FMA pipe (sm90::ex2_poly) instead of the MUFU
# unit. Three libraries built on the CPU machine (sm_90a): build/lib (every exp2 on MUFU), build-x4/lib (every 4th
# group of 8 keys, 5 of 22 at 176-key blocks), build-x2/lib (every 2nd, 11 of 22). Each runs
# bench/attention_bench.py --quick --head-dim 64 (B=1, S=8k, 32 heads, MHA and GQA, causal and not; cuDNN and flash
# in the same process), in the order 0 4 2 2 4 0; then the GPU attention tests on each variant; then the Python GPU
# tier on build/ (first since 46acb65). Bounded to MK_CALL_S (default 560 s) in all; logs and reports to $OUT.
set -u
source tools/gpu_env.sh
t0=$(date +%s); o=${OUT:-/tmp}
py=$(tools/test_python.sh)
for v in 0 4 2 2 4 0; do
  lib=build/lib; [ "$v" != 0 ] && lib=build-x$v/lib
  MK_LIBRARY=$PWD/$lib/libmkernel.so timeout -k 5 90 "$py" bench/attention_bench.py --quick --head-dim 64 \
    --out "$o/x$v" > "$o/bench_x$v.log" 2>&1
  echo "=== poly $v: rc $? at $(( $(date +%s) - t0 )) s"
done
for v in 4 2; do
  PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build-x$v/lib/libmkernel.so timeout -k 5 120 "$py" -m pytest -q \
    -p no:cacheprovider tests/python/gpu/test_attention_gpu.py > "$o/pytest_x$v.log" 2>&1
  echo "=== attention tests, poly $v: rc $? ($(tail -1 "$o/pytest_x$v.log")) at $(( $(date +%s) - t0 )) s"
done
left=$(( ${MK_CALL_S:-560} - ($(date +%s) - t0) ))
echo "=== tools/gpu_test.sh python, bounded to $left s"
MK_GPU_TEST_STEP_S=240 timeout -k 5 "$left" tools/gpu_test.sh python > "$o/gpu_test_py.log" 2>&1; g=$?
grep -E "^=== (PASSED|FAILED|SKIPPED)|passed|failed" "$o/gpu_test_py.log" | cut -c1-240 | head -40
echo "=== tools/gpu_test.sh python: rc $g at $(( $(date +%s) - t0 )) s"
