#!/usr/bin/env bash
# One device call (nvidia-h200-x2) that validates tools/wip/attn-overlap.patch
# against main. Prepare here first:
#   (on main) cmake --build build -j2 && mkdir -p .carry/libmain && cp build/lib/libmkernel.so .carry/libmain/
#   git checkout -b try-overlap && git am tools/wip/attn-overlap.patch && cmake --build build -j2 && tools/check_ptxas.sh
# then run with carry ["build/bin", "build/lib", ".carry/libmain"]:
#   tools/wip/validate_attn_overlap.sh   (results under $OUT, or bench/results without it)
# Correctness with the patched library (attention tests, ring checks 1x2 and
# 2x1 emu, the timeout test), then bench/attention_bench.py with main's
# library and with the patched one, back to back (ratios to cuDNN compare).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu_env.sh
out=${OUT:-bench/results}
new="$PWD/build/lib/libmkernel.so" old="$PWD/.carry/libmain/libmkernel.so"
export PYTHONPATH="$PWD/python"
fail=0
step() { echo "=== $*"; timeout 300 "$@" || { echo "=== FAILED: $*"; fail=1; }; }
step env MK_LIBRARY="$new" python3 -m pytest -q -x -p no:cacheprovider tests/python/gpu/test_attention_gpu.py
step env MK_LIBRARY="$new" torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
step env MK_LIBRARY="$new" MK_RANKS_PER_NODE=1 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_check.py
step env MK_LIBRARY="$new" MK_TIMEOUT_MS=1000 torchrun --standalone --nproc_per_node=2 tests/python/gpu/dist_ring_attn_timeout.py
if [ $fail -eq 0 ]; then
  for lib in "$old" "$new"; do
    echo "=== attention_bench with $lib"
    MK_LIBRARY="$lib" timeout 300 python3 bench/attention_bench.py --out "$out" | tail -40
  done
fi
exit $fail
