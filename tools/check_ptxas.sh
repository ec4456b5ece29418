#!/usr/bin/env bash
# Fails when ptxas, compiling a kernel that runs the GEMM or attention engine, reports that
# it serialised wgmma (C7510/C7515: a function call anywhere in the kernel,
# e.g. a printf on a failure path), ignored setmaxnreg (C7507) or spilled.
# The GEMM stays correct in each case but loses much of its speed, so this
# guards every change to code that shares a kernel with the engine.
set -uo pipefail
cd "$(dirname "$0")/.."
nvcc=nvcc
[ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
fail=0
for f in $(grep -lE 'device/(gemm/gemm|attention/attn)_engine.cuh' src/ops/*/*.cu); do
  out=$("$nvcc" -I include -I . -std=c++20 --expt-relaxed-constexpr -O3 --threads 2 \
        -gencode=arch=compute_90a,code=sm_90a -Xptxas=-v -c "$f" -o /dev/null 2>&1)
  if [ $? -ne 0 ]; then echo "$out"; echo "FAILED to compile: $f"; fail=1; continue; fi
  bad=$(echo "$out" | grep -E "C75[0-9][0-9]|[1-9][0-9]* bytes spill")
  # Known: the ring-attention kernel's K/V push (warps 1..3 of the producer
  # warpgroup, 96-register budget) spills a little in its inlined failure
  # paths; the engine's MMA warpgroups must still never spill or serialise.
  # Allowed: at most 128 bytes of spill stores there, nothing else.
  if [ "$f" = src/ops/ring_attention/ring_attention.cu ]; then
    bad=$(echo "$out" | grep -E "C75[0-9][0-9]" ; echo "$out" | grep -oE "[0-9]+ bytes spill stores" | awk '$1 > 128')
  fi
  if [ -n "$bad" ]; then echo "$bad"; echo "FAIL: $f"; fail=1; else echo "ok: $f (no wgmma serialisation, no spills beyond the allowance above)"; fi
done
exit $fail
