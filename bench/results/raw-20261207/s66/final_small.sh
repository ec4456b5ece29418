# Session 66, the last call (too little device time was left for final.sh's whole compiled part): ae50d90's test
# changes alone on one GPU: GraphUses (the library runtime's pending error), gpu_test.sh's new DeviceHealth step
# (its command as gpu_test.sh runs it), and the Python GPU tests under the new conftest rule. ~1 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=60 run build/bin/mk_gpu_tests --gtest_filter='GraphUses.*'
step_s=60 run bash -c 'o=$(build/bin/mk_cpu_tests --gtest_filter="DeviceHealth.*" 2>&1); r=$?; echo "$o"
               [ $r -eq 0 ] || exit $r
               ! grep -q "^\[  SKIPPED \]" <<< "$o" || { echo "a test skipped on a GPU machine"; exit 1; }'
step_s=120 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" \
  python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
echo "fail=$fail"
