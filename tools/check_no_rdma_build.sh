#!/usr/bin/env bash
# mkernel without its RDMA backends (no GPU needed): a machine without the verbs and libfabric headers (and no root
# to install them) builds the library with MK_NET_BACKENDS=auto leaving both out. This configures such a build here
# (-DMK_NET_BACKENDS=none: the headers may be present, the build must not touch them; a source that includes one
# fails at its #error), builds the library and the network probe only, and runs ctest's entries for a backend left
# out: asked for by name, each refuses saying so; MK_NET=auto names both among what it tried; mk_net_backends() says
# "emu". Then a misspelt backend, and an empty list, fail configure, saying so.
# Usage: tools/check_no_rdma_build.sh BUILD_DIR [CMAKE] (its scratch build goes to BUILD_DIR/no-rdma)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:?usage: check_no_rdma_build.sh BUILD_DIR [CMAKE]}" && pwd)/no-rdma"
cmake="${2:-cmake}"
ctest="$(dirname "$(command -v "$cmake")")/ctest"
[ -x "$ctest" ] || ctest=ctest
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
gen=(); command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
mkdir -p "$build"
log="$build/check.log"
: > "$log"
"$cmake" -S "$repo" -B "$build/b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMK_OPS=none -DMK_NET_BACKENDS=none \
    -DMK_BUILD_TESTS=ON -DMK_BUILD_BENCH=OFF >>"$log" 2>&1 || { cat "$log"; echo "FAIL: configure"; exit 1; }
grep -q "mkernel RDMA network backends:  (MK_NET_BACKENDS=none" "$log" ||
  { cat "$log"; echo "FAIL: configure did not report building no RDMA backend"; exit 1; }
"$cmake" --build "$build/b" --target mkernel mk_net_probe >>"$log" 2>&1 || { cat "$log"; echo "FAIL: build"; exit 1; }
# (the library's sources of each backend are left out of the build: no object of theirs, under either generator;
# select.cpp's object shows the folder is the one objects go to)
objs="$build/b/CMakeFiles/mkernel.dir/src/net"
[ -f "$objs/select.cpp.o" ] || { echo "FAIL: no $objs/select.cpp.o: where do the library's objects go?"; exit 1; }
rdma_objs=$(find "$objs" -name '*.o' \( -path '*/verbs/*' -o -name 'fi_api.*' -o -name 'fabric_setup.*' \
                                        -o -name 'fabric_datapath.*' \))
[ -z "$rdma_objs" ] || { echo "FAIL: a build without the RDMA backends compiled: $rdma_objs"; exit 1; }
# (the library says what it has: mk_net_backends, through the package)
have=$(PYTHONPATH="$repo/python" MK_LIBRARY="$build/b/lib/libmkernel.so" python3 -c \
       'import mkernel; print(" ".join(mkernel.net_backends()))')
[ "$have" = emu ] ||
  { echo "FAIL: mk_net_backends() is '$have' in a build without the RDMA backends (want 'emu')"; exit 1; }
tests='^cpu\.net_(refuses_absent_verbs|refuses_absent_fabric|auto_names_absent_backends)$'
(cd "$build/b" && "$ctest" -R "$tests" --output-on-failure) | tee -a "$log"
n=$(cd "$build/b" && "$ctest" -N -R "$tests" | grep -c "Test *#" || true)
[ "$n" = 3 ] || { echo "FAIL: expected 3 ctest entries for the absent backends, found $n"; exit 1; }
# A backend name that is not one, or none at all, fails configure, naming it (before any header is looked for).
bad() {  # bad VALUE EXPECTED-TEXT
  rm -rf "$build/bad"
  if "$cmake" -S "$repo" -B "$build/bad" "${gen[@]}" -DMK_OPS=none -DMK_NET_BACKENDS="$1" \
      -DMK_BUILD_TESTS=OFF -DMK_BUILD_BENCH=OFF >"$build/bad.log" 2>&1; then
    echo "FAIL: configure took MK_NET_BACKENDS='$1'"; exit 1
  fi
  grep -q "$2" "$build/bad.log" || { cat "$build/bad.log"; echo "FAIL: configure's error did not say: $2"; exit 1; }
}
bad "verbs;infiniband" "MK_NET_BACKENDS names 'infiniband'"
bad "" "MK_NET_BACKENDS is empty"
echo "ok: a build without the RDMA backends configures, builds, and refuses MK_NET=verbs/fabric saying so"
