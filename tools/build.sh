#!/usr/bin/env bash
# Configures and builds mkernel into build/ (Release, sm_90a). Extra args go
# to CMake's configure step, e.g. tools/build.sh -DMK_OPS=none. Each call
# configures the defaults of MK_OPS, MK_NET_BACKENDS, MK_BUILD_TESTS and
# MK_BUILD_BENCH plus its arguments: an earlier call's choice does not stick in
# build/'s cache (tools/test.sh and tools/bench.sh, calling this without them,
# then tested or ran a reduced build without a word).
set -euo pipefail
cd "$(dirname "$0")/.."
# The image's toolkit first (a distribution's older nvcc may be on PATH too), else a versioned folder.
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
elif ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda-13.0/bin/nvcc ]; then
  export PATH="/usr/local/cuda-13.0/bin:$PATH"
fi
.cmake-bin/cmake --version >/dev/null 2>&1 && export PATH="$PWD/.cmake-bin:$PATH"  # (setup.sh: PyPI's CMake)
jobs=${MK_BUILD_JOBS:-0}
[ "$jobs" -gt 0 ] || jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMK_OPS=all -DMK_NET_BACKENDS=auto -DMK_BUILD_TESTS=ON \
  -DMK_BUILD_BENCH=ON "$@"
cmake --build build -j "$jobs"
