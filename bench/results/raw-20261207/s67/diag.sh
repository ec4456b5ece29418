# Session 67, call 22: call 21's tools/bench.sh --quick ended with a segmentation fault in the attention benchmark
# (bench/attention_bench.py --quick, with the library that bench.sh built on this machine: GCC 13.3 at /opt/gcc,
# CMake 4.4.3, verbs only). The same build again (no tests, as bench.sh), then that step under Python's
# faulthandler, and the package's import alone, to see where. Bounded to ~4 min.
set -u
fresh=/tmp/mk-fresh; rm -rf "$fresh"; mkdir -p "$fresh"
tar --exclude=./build --exclude='./build-*' --exclude=./.venv-test --exclude=./.carry -cf - . | tar -xf - -C "$fresh"
cd "$fresh"
source tools/gpu_env.sh
MK_BUILD_JOBS=16 timeout 150 tools/build.sh -DMK_BUILD_TESTS=OFF > "${OUT:-/tmp}/build.log" 2>&1; echo "build rc $?"
timeout 30 python3 -X faulthandler -c 'import sys; sys.path.insert(0, "python"); import mkernel
print("import ok:", mkernel.library_path, mkernel.net_backends())'; echo "import rc $?"
timeout 60 python3 -X faulthandler bench/attention_bench.py --quick 2>&1 | tail -40; echo "attention rc ${PIPESTATUS[0]}"
ldd build/lib/libmkernel.so | head; python3 -c 'import torch; print(torch.__version__, torch.__file__)'
