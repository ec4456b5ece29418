#!/usr/bin/env bash
# Sets up, builds and runs mkbench on every GPU of this machine, one process
# per GPU. Extra arguments go to mkbench (e.g. --quick, or benchmark names).
# Exits non-zero, saying so, on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
source tools/gpu_env.sh
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -eq 0 ]; then
  exec build/bin/mkbench "$@"   # prints that there is no GPU and exits non-zero
fi
exec tools/mkrun -n "$ngpu" --timeout 3000 build/bin/mkbench "$@"
