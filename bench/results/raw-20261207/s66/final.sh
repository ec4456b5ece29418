# Session 66, call 8: the test changes of ae50d90 on one GPU: tools/gpu_test.sh compiled (now also mk_cpu_tests'
# DeviceHealth tests, failing a skip; GraphUses asking the library's runtime for a pending error), then the Python
# GPU tests under the new conftest rule (torch sees the GPU: they run). Carry `build/bin build/lib`. ~5 min.
set -u
MK_GPU_TEST_STEP_S=240 tools/gpu_test.sh compiled; c=$?
source tools/gpu_env.sh; source tools/gpu_steps.sh
step_s=120 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" \
  python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
echo "compiled=$c fail=$fail"
