#!/usr/bin/env bash
# Configures and builds mkernel into build/ (Release, sm_90a). Extra args go
# to CMake's configure step, e.g. tools/build.sh -DMK_OPS=none.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
.cmake-bin/cmake --version >/dev/null 2>&1 && export PATH="$PWD/.cmake-bin:$PATH"  # (setup.sh: PyPI's CMake)
jobs=${MK_BUILD_JOBS:-0}
[ "$jobs" -gt 0 ] || jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$jobs"
