#!/usr/bin/env bash
# Builds the host side (MK_OPS=none: the communicator, bootstrap, command
# queue, proxy and transports; no fused-op kernels) with a sanitizer into
# build-<kind>/ and runs the CPU tier there:
#   tools/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer (leaks too)
#   tools/sanitize.sh tsan   ThreadSanitizer (the proxy and transport threads)
# Not part of tools/test.sh (each adds ~8 minutes of build on 2 cores).
# Exclusions, each a limit of the tool, not of the code:
# - tsan: the bootstrap world tests fork ranks from a threaded process
#   ("starting new threads after multi-threaded fork is not supported");
# - tsan: libfabric's sockets provider writes the target buffer from its own
#   (uninstrumented) progress thread, as a NIC would, ordered by the
#   completion the test waits for, which TSan cannot see
#   (cpu.fabric_rounds_sockets_atomics_3);
# - both: the CMake consumer test (cpu.cmake_consumer_install) builds a program without the sanitizer against the
#   sanitized library, which ASan refuses at startup ("ASan runtime does not come first") and TSan's runtime
#   crashes in (its interceptors not first either); it runs in tools/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
case "$kind" in
  asan)
    flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    link="-fsanitize=address,undefined"
    export ASAN_OPTIONS="protect_shadow_gap=0:detect_leaks=1:halt_on_error=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    unit_filter="*"
    ctest_skip="ptxas|python|cpu.unit|cmake_consumer_install"
    ;;
  tsan)
    flags="-fsanitize=thread -fno-omit-frame-pointer"
    link="-fsanitize=thread"
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0"
    unit_filter="-Ranks/BootstrapWorld.*"
    ctest_skip="ptxas|python|cpu.unit|fabric_rounds_sockets|cmake_consumer_install"
    ;;
  *)
    echo "usage: tools/sanitize.sh asan|tsan" >&2
    exit 2
    ;;
esac
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
tools/setup.sh
.cmake-bin/cmake --version >/dev/null 2>&1 && export PATH="$PWD/.cmake-bin:$PATH"  # (setup.sh: PyPI's CMake)
dir="build-$kind"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMK_OPS=none -DMK_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$link" -DCMAKE_SHARED_LINKER_FLAGS="$link"
# (the network probes of the RDMA backends this build has: MK_NET_BACKENDS=auto leaves out those without headers)
targets=(mk_cpu_tests mk_bootstrap_probe mk_net_probe)
for t in mk_fabric_probe mk_softverbs; do
  ninja -C "$dir" -t query "$t" >/dev/null 2>&1 && targets+=("$t")
done
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]}"
"$dir/bin/mk_cpu_tests" --gtest_filter="$unit_filter"
ctest --test-dir "$dir" -L cpu -E "$ctest_skip" --output-on-failure --timeout 300
echo "[sanitize] $kind: the CPU tier passed"
