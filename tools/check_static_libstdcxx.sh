#!/usr/bin/env bash
# libmkernel.so built by a toolchain that links libstdc++ statically (the GPU machine's /opt/gcc g++ does; here:
# -static-libstdc++), then loaded by a process that already has libstdc++.so.6 (Python with torch): the library
# must keep its own copy's symbols inside it (CMakeLists.txt: --exclude-libs). Exported, the process's copy took
# some calls and not others: a stream of one copy used the other's locale, and messages lost their numbers
# (mk_print_config's "[1, 86400000]" came out "[") or mk_attention_fwd crashed (session 67, call 23). This builds
# such a library (MK_OPS=none) under BUILD_DIR/static-libstdcxx, checks that it exports none of libstdc++'s
# symbols, and reads mk_print_config from Python after torch (which showed the missing numbers; without torch,
# libstdc++.so.6 loaded first, globally, which did not). No GPU needed. Skips (77) where this toolchain cannot link
# libstdc++ statically. Usage: tools/check_static_libstdcxx.sh BUILD_DIR [CMAKE] [PYTHON]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:?usage: check_static_libstdcxx.sh BUILD_DIR [CMAKE]}" && pwd)/static-libstdcxx"
cmake="${2:-cmake}"
py="${3:-python3}"
command -v "$py" >/dev/null 2>&1 || { echo "SKIP: no Python ($py) to load the library from"; exit 77; }
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
probe="${TMPDIR:-/tmp}/mk-static-probe.$$"
echo 'int main() { return 0; }' > "$probe.cpp"
if ! g++ -static-libstdc++ "$probe.cpp" -o "$probe" 2>/dev/null; then
  rm -f "$probe" "$probe.cpp"; echo "SKIP: this toolchain cannot link libstdc++ statically"; exit 77
fi
rm -f "$probe" "$probe.cpp"
gen=(); command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
mkdir -p "$build"
"$cmake" -S "$repo" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMK_OPS=none -DMK_BUILD_TESTS=OFF \
  -DMK_BUILD_BENCH=OFF -DCMAKE_SHARED_LINKER_FLAGS=-static-libstdc++ > "$build/check.log" 2>&1 &&
  "$cmake" --build "$build" --target mkernel >> "$build/check.log" 2>&1 ||
  { cat "$build/check.log"; echo "FAIL: build"; exit 1; }
lib="$build/lib/libmkernel.so"
deps=$(ldd "$lib")  # (kept first: `ldd | grep -q` can lose ldd to SIGPIPE under pipefail and skip this guard)
if grep -q "libstdc++" <<< "$deps"; then
  echo "$deps"; echo "FAIL: -static-libstdc++ did not take (the check would show nothing)"; exit 1
fi
# (std::ostream::_M_insert<long>, std::locale's members: libstdc++'s own, which only its archive defines here)
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -E '^(_ZNSo9_M_insertIlEERSoT_|_ZNSt6locale)' || true)
[ -z "$exported" ] || { echo "FAIL: the library exports libstdc++'s symbols:"; echo "$exported" | head; exit 1; }
"$py" - "$lib" <<'PY'
import ctypes, ctypes.util, sys
try:
    import torch  # noqa: F401  (it loads libstdc++.so.6 and uses its locale first)
    first = "torch " + torch.__version__
except Exception:  # (no torch, or one that does not load here)
    ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    first = "libstdc++.so.6 (no torch)"
lib = ctypes.CDLL(sys.argv[1])
buf = ctypes.create_string_buffer(1 << 16)
assert lib.mk_print_config(buf, len(buf)) == 0
line = next(l for l in buf.value.decode().splitlines() if l.strip().startswith("MK_TIMEOUT_MS "))
assert "(int in [1, 86400000], default '5000')" in line, f"a number went missing: {line!r}"
print(f"python, {first} loaded first:", line.strip())
PY
echo "ok: a library with libstdc++ linked in keeps it inside"
