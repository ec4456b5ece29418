#!/usr/bin/env bash
# Sets up, builds and runs every test tier through ctest. On a machine without
# a GPU the gpu and dist tiers report "Skipped" (exit 77) and the CPU tier runs.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
test_python=$(tools/setup_test_python.sh)
tools/build.sh -DMK_TEST_PYTHON="$test_python"
source tools/gpu_env.sh
.cmake-bin/ctest --version >/dev/null 2>&1 && export PATH="$PWD/.cmake-bin:$PATH"  # (setup.sh: PyPI's CMake)
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "[test] no GPU on this machine: the gpu and dist tiers will report 'Skipped' (exit 77);"
  echo "[test] run them on a GPU machine with tools/test.sh or, from a copied build, tools/gpu_test.sh"
fi
ctest --test-dir build --output-on-failure --timeout 600 "$@"
