#!/usr/bin/env bash
# Sets up, builds and runs every test tier through ctest. On a machine without
# a GPU the gpu and dist tiers report "Skipped" (exit 77) and the CPU tier runs.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
source tools/gpu_env.sh
ctest --test-dir build --output-on-failure --timeout 600 "$@"
