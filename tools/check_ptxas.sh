#!/usr/bin/env bash
# Fails when ptxas, compiling a kernel that runs the GEMM or attention engine, reports that
# it serialised wgmma (C7510/C7515: a function call anywhere in the kernel,
# e.g. a printf on a failure path), ignored setmaxnreg (C7507) or spilled.
# The GEMM stays correct in each case but loses much of its speed, so this
# guards every change to code that shares a kernel with the engine. Then
# tools/check_uniform_loop.py reads the ring-attention kernel's SASS: its K
# loop must stay on the uniform datapath as the one-GPU kernel's does.
set -uo pipefail
cd "$(dirname "$0")/.."
nvcc=nvcc
[ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
fail=0
obj=$(mktemp -d); trap 'rm -rf "$obj"' EXIT
for f in $(grep -lE 'device/(gemm/gemm|attention/attn)_engine.cuh' src/ops/*/*.cu); do
  out=$("$nvcc" -I include -I . -std=c++20 --expt-relaxed-constexpr -O3 --threads 2 \
        -gencode=arch=compute_90a,code=sm_90a -Xptxas=-v -c "$f" -o "$obj/$(basename "$f").o" 2>&1)
  if [ $? -ne 0 ]; then echo "$out"; echo "FAILED to compile: $f"; fail=1; continue; fi
  bad=$(echo "$out" | grep -E "C75[0-9][0-9]|[1-9][0-9]* bytes spill")
  # Known spills, each on a path the MMA warpgroups do not run (they must
  # never spill or serialise), with an allowance in bytes of spill stores:
  # - the ring-attention kernel at D = 128 (176-key blocks, the producer
  #   warpgroup at 56 registers beside the consumers' 224): its K/V push
  #   (warps 1..3 of the producer warpgroup) in its setup, item walk and
  #   failure paths, and one value kept from the kernel's start; none in the
  #   consumers (SASS, 2026-12-02): 180, allowance 224. At D = 64 (128-key
  #   blocks, 88 registers): 12. With the push's parts claimed at run time
  #   (2026-12-03): 128 and 48, every STL after the producer warpgroup's
  #   setmaxnreg.dealloc (cuobjdump -sass), none in the consumers;
  # - the one-GPU attention kernel's producer thread (56 registers beside
  #   the consumers' 224, device/attention/attn_engine.cuh Regs) keeps one
  #   register across its failure record (the SASS: STL/LDL around the
  #   record's stores, after the first-failure CAS): 8;
  # - the GEMM kernels' producer thread (56 registers), the same way in its
  #   wait's failure record, since work_unit also maps split tiles at the
  #   walk's end (GemmParams::split_last; STL/LDL of one register around the
  #   record's CTA id, after the first-failure CAS, in all four): 4.
  allow=0
  [ "$f" = src/ops/ring_attention/ring_attention.cu ] && allow=224
  [ "$f" = src/ops/attention/attention.cu ] && allow=8
  case "$f" in src/ops/gemm/gemm_kernel.cu|src/ops/ag_gemm/ag_gemm.cu|src/ops/gemm_rs/gemm_rs.cu|src/ops/gemm_ar/gemm_ar.cu)
    allow=4 ;;
  esac
  if [ $allow -gt 0 ]; then
    bad=$(echo "$out" | grep -E "C75[0-9][0-9]" ; echo "$out" | grep -oE "[0-9]+ bytes spill stores" | awk -v a=$allow '$1 > a')
  fi
  if [ -n "$bad" ]; then echo "$bad"; echo "FAIL: $f"; fail=1; else echo "ok: $f (no wgmma serialisation, no spills beyond the allowance above)"; fi
done
# The ring kernel's K loop on the uniform datapath, as the one-GPU kernel's
# (what the push's code in the producer warpgroup can silently cost).
# (The tests' Python, where cuobjdump / nvdisasm may come from NVIDIA's wheels: tools/setup_test_python.sh.)
"$(tools/test_python.sh)" tools/check_uniform_loop.py "$obj/ring_attention.cu.o" "$obj/attention.cu.o" || fail=1
exit $fail
