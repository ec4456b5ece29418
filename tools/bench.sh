#!/usr/bin/env bash
# Sets up, builds and runs mkbench on every GPU of this machine, one process
# per GPU. Extra arguments go to mkbench (e.g. --quick, or benchmark names).
# Then, where torch is installed (the system's Python, else tools/test.sh's
# .venv-test), the attention benchmarks against torch SDPA
# in their --quick form: the one-GPU engine (bench/attention_bench.py) and,
# on 2 or more GPUs, ring attention (bench/torch_ring_attn_bench.py, 2
# ranks); run those scripts directly for their full sweeps. Exits non-zero,
# saying so, on a machine without a GPU, or when a benchmark fails.
set -euo pipefail
cd "$(dirname "$0")/.."
MK_SETUP_TESTS=0 tools/setup.sh  # (no GoogleTest: the benchmark builds no test tier)
tools/build.sh -DMK_BUILD_TESTS=OFF
source tools/gpu_env.sh
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -eq 0 ]; then
  exec build/bin/mkbench "$@"   # prints that there is no GPU and exits non-zero
fi
rc=0
tools/mkrun -n "$ngpu" --timeout 3000 build/bin/mkbench "$@" || rc=$?
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" MK_LIBRARY="$PWD/build/lib/libmkernel.so"
# The system's Python where it has torch, else the tests' venv where tools/test.sh put torch in it.
py=python3
if ! python3 -c 'import torch' 2>/dev/null && [ -x .venv-test/bin/python3 ] &&
   .venv-test/bin/python3 -c 'import torch' 2>/dev/null; then
  py=.venv-test/bin/python3
fi
if "$py" -c 'import torch' 2>/dev/null; then
  timeout 900 "$py" bench/attention_bench.py --quick || rc=$?
  if [ "$ngpu" -ge 2 ]; then
    timeout 900 "$py" -m torch.distributed.run --standalone --nproc_per_node=2 bench/torch_ring_attn_bench.py --quick \
      || rc=$?
  else
    echo "bench.sh: ring attention benchmark skipped (needs 2 GPUs; have $ngpu)"
  fi
else
  echo "bench.sh: attention benchmarks skipped (no torch: pip install torch, or run tools/test.sh, which puts" \
       "torch into .venv-test)"
fi
exit $rc
