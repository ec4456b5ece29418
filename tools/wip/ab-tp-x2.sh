#!/usr/bin/env bash
# 2 GPUs of one node (~5 minutes for two libraries): GEMM-engine libraries built aside (each LIB_DIR holds a
# libmkernel.so built against main's build/) against main on 1x2: the TP ops' dist tests with each library, then
# twice, alternating main / each library: mkbench ag_gemm gemm_rs gemm_ar (1x2) and bench/torch_tp_bench.py.
# Usage (device, nvidia-h200-x2): bash tools/wip/ab-tp-x2.sh LIB_DIR [LIB_DIR...]  (results tarred to $OUT/ab-tp.tgz)
[ $# -ge 1 ] || { echo "usage: $0 LIB_DIR [LIB_DIR...]" >&2; exit 2; }
for d in "$@"; do [ -f "$d/libmkernel.so" ] || { echo "$0: no $d/libmkernel.so" >&2; exit 2; }; done
cd "$(dirname "$0")/../.." || exit 2
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python
[ "$(nvidia-smi -L | grep -c '^GPU')" -ge 2 ] || { echo "$0: needs 2 GPUs" >&2; exit 2; }
R=$OUT/ab-tp; mkdir -p "$R"
libs=("$PWD/build/lib")
for d in "$@"; do libs+=("$(cd "$d" && pwd)"); done
name() { [ "$1" = "$PWD/build/lib" ] && echo main || basename "$1"; }
for l in "${libs[@]:1}"; do
  n=$(name "$l")
  timeout 200 tools/mkrun -n 2 --timeout 190 env LD_LIBRARY_PATH="$l" \
    build/bin/mk_dist_tests --gtest_filter='AgGemm*:GemmRs*:GemmAr*' > "$R/tp_tests_$n.log" 2>&1
  echo "dist tests AgGemm*/GemmRs*/GemmAr* 1x2 ($n) rc=$?"; grep -E "^\[  (PASSED|FAILED) " "$R/tp_tests_$n.log" | head -4
done
for r in 1 2; do
  for l in "${libs[@]}"; do
    n=$(name "$l"); o=$R/$n-r$r; mkdir -p "$o"
    timeout 120 tools/mkrun -n 2 --timeout 115 env LD_LIBRARY_PATH="$l" build/bin/mkbench --out "$o" \
      ag_gemm gemm_rs gemm_ar > "$o/mkbench.log" 2>&1; echo "mkbench 1x2 ($n r$r) rc=$?"
    MK_LIBRARY=$l/libmkernel.so timeout 200 torchrun --standalone --nproc_per_node=2 bench/torch_tp_bench.py \
      --out "$o" > "$o/torch_tp.log" 2>&1; echo "torch_tp_bench ($n r$r) rc=$?"
    grep -E "^\| 1x2" "$o"/torch-tp-*.md 2>/dev/null | cut -d'|' -f2-6 | head -15
  done
done
tar czf "$OUT/ab-tp.tgz" -C "$OUT" ab-tp && rm -rf "$R"
