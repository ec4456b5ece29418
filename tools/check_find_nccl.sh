#!/usr/bin/env bash
# cmake/find_nccl.cmake's fallback (no GPU needed): where neither the CUDA toolkit nor /usr/include has NCCL, mkbench
# takes the nvidia-nccl wheel of the Python on PATH, as pip's torch installs it (site-packages/nvidia/nccl/include and
# lib, libnccl.so.2 alone). A scratch wheel folder holds the toolkit's nccl.h and libnccl.so.2; a scratch project
# (tests/cpu/find_nccl) configured with the toolkit's folders pointed at an empty one must find them there, build, and
# run against the wheel's library through its RPATH; without the wheel, configure must fail naming the ways to get it.
# Skips (77) where this machine has no NCCL to copy. Usage: tools/check_find_nccl.sh [CMAKE]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cmake="${1:-cmake}"
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
cuda="$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)"
h=""; for d in "$cuda/include" /usr/include; do [ -f "$d/nccl.h" ] && { h=$d/nccl.h; break; }; done
so=$(ls "$cuda"/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2 2>/dev/null | head -1 || true)
[ -n "$h" ] && [ -n "$so" ] || { echo "SKIP: no nccl.h and libnccl.so.2 here to copy"; exit 77; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mk-find-nccl.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/site/nvidia/nccl/include" "$tmp/site/nvidia/nccl/lib" "$tmp/empty"
cp "$h" "$tmp/site/nvidia/nccl/include/"
ln -s "$so" "$tmp/site/nvidia/nccl/lib/libnccl.so.2"  # (a link: 200 MB; the RPATH names the wheel's folder)
gen=(); command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
# A Python that sees only PYTHONPATH (-S: no site-packages, where pip's torch may have put a real wheel).
printf '#!/bin/sh\nexec python3 -S "$@"\n' > "$tmp/python3"; chmod +x "$tmp/python3"
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
configure() {  # configure DIR: the scratch project with the toolkit's and the system's folders out of its sight
  "$cmake" -S "$repo/tests/cpu/find_nccl" -B "$1" "${gen[@]}" -DMK_SOURCE_DIR="$repo" -DMK_NCCL_PYTHON="$tmp/python3" \
    -DCUDAToolkit_INCLUDE_DIRS="$tmp/empty" -DCUDAToolkit_LIBRARY_DIR="$tmp/empty" \
    -DCUDA_RUNTIME_INCLUDE="$cuda/include" \
    -DCMAKE_PREFIX_PATH="$tmp/empty" -DCMAKE_IGNORE_PREFIX_PATH="$cuda" \
    -DCMAKE_IGNORE_PATH="/usr/include;/usr/local/include;/usr/lib/$multiarch;/usr/lib;/usr/local/lib" > "$1.log" 2>&1
}
# With the wheel on the Python's path: found there, built, run from the wheel's folder.
if ! PYTHONPATH="$tmp/site" configure "$tmp/b"; then cat "$tmp/b.log"; echo "FAIL: configure with the wheel"; exit 1; fi
grep -q "mkbench: NCCL from the Python wheel at $tmp/site/nvidia/nccl" "$tmp/b.log" ||
  { cat "$tmp/b.log"; echo "FAIL: NCCL was not taken from the wheel"; exit 1; }
"$cmake" --build "$tmp/b" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; echo "FAIL: build"; exit 1; }
# (ldd's text kept first: a `grep -q` that stops reading can kill ldd with SIGPIPE, which pipefail counts)
deps=$(unset LD_LIBRARY_PATH; ldd "$tmp/b/nccl_version")
grep -q "libnccl.so.2 => $tmp/site/nvidia/nccl/lib/" <<< "$deps" ||
  { echo "$deps"; echo "FAIL: the program does not load the wheel's libnccl.so.2"; exit 1; }
(unset LD_LIBRARY_PATH; "$tmp/b/nccl_version")
# Without it: configure fails, saying where it looked.
if configure "$tmp/c"; then cat "$tmp/c.log"; echo "FAIL: configure passed with no NCCL anywhere"; exit 1; fi
grep -q "mkbench needs NCCL" "$tmp/c.log" || { cat "$tmp/c.log"; echo "FAIL: configure's error"; exit 1; }
echo "ok: NCCL from a Python wheel (configure, build, run), and a clear error without any"
