#!/usr/bin/env bash
# mkernel from a C++ project's side, the two usual ways (no GPU needed):
#   install   `cmake --install BUILD --prefix` a scratch prefix, then configure, build and run tests/cpu/consumer
#             against it (find_package(mkernel CONFIG), mkernel::mkernel, the C ABI, the C++ API, a kernel on the
#             installed device headers, its own device/ folder first on its include path);
#   subdir    configure tests/cpu/subproject, which takes this tree with add_subdirectory: mkernel must make its
#             library alone there (no test or benchmark targets) and the target mkernel::mkernel.
# Usage: tools/check_cmake_consumers.sh install|subdir BUILD_DIR [CMAKE]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
mode="${1:?usage: check_cmake_consumers.sh install|subdir BUILD_DIR [CMAKE]}"
build="$(cd "${2:?usage: check_cmake_consumers.sh install|subdir BUILD_DIR [CMAKE]}" && pwd)"
cmake="${3:-cmake}"
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
gen=(); command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
tmp="$(mktemp -d "${TMPDIR:-/tmp}/mk-consumer.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
case "$mode" in
  install)
    "$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
    for f in include/mkernel/mkernel.h include/mkernel/tp.hpp include/mkernel/device/signals.cuh \
             lib/cmake/mkernel/mkernelConfig.cmake; do
      [ -f "$tmp/prefix/$f" ] || { echo "FAIL: the install has no $f"; exit 1; }
    done
    [ -e "$tmp/prefix/include/device" ] && { echo "FAIL: the install put a bare device/ in include/"; exit 1; }
    "$cmake" -S "$repo/tests/cpu/consumer" -B "$tmp/b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
    "$cmake" --build "$tmp/b" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
    # (the consumer finds the installed library through the build tree's RPATH, not this tree's build/lib)
    unset LD_LIBRARY_PATH
    "$tmp/b/consumer"
    ;;
  subdir)
    "$cmake" -S "$repo/tests/cpu/subproject" -B "$tmp/b" "${gen[@]}" -DMK_SOURCE_DIR="$repo" \
        >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; exit 1; }
    grep "mkernel subproject: configured" "$tmp/configure.log"
    ;;
  *) echo "usage: check_cmake_consumers.sh install|subdir BUILD_DIR [CMAKE]" >&2; exit 2 ;;
esac
