#!/usr/bin/env bash
# Installs what mkernel's build needs and is missing (idempotent; apt-get on
# Debian/Ubuntu; CMake from PyPI into .venv-cmake if the system one is too old).
# Run by tools/test.sh and tools/bench.sh (its PATH changes stay here: tools/build.sh and
# tools/test.sh put .cmake-bin on PATH themselves).
#   MK_SETUP_TESTS=0   leave GoogleTest out (tools/bench.sh: it builds no test tier)
set -euo pipefail

log() { echo "[setup] $*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi
# apt_get ARGS...: apt-get as root, never asking (DEBIAN_FRONTEND through env: sudo's env_reset drops it). Another
# apt holding its lock (unattended-upgrades or cloud-init on a fresh VM) is waited for, saying so, up to 10 minutes
# a call; apt-get update does not wait by itself, and any other failure (not root: "are you root?") stops at once
# with apt's own message.
apt_get() {
  local deadline=$((SECONDS + 600)) rc err
  while :; do
    rc=0
    # (apt's stderr kept to read, its stdout passed on)
    { err=$($SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=30 "$@" 2>&1 1>&3 3>&-); } \
      3>&1 || rc=$?
    if [ "$rc" -ne 0 ] && [ "$SECONDS" -lt "$deadline" ] &&
       grep -qiE 'could not get lock|is another process using it' <<< "$err"; then
      log "apt-get $1: another apt holds its lock ($(grep -ioEm1 'held by process [0-9]+( \([^)]*\))?' <<< "$err" ||
          echo 'its holder not named')); waiting, up to 10 minutes"
      sleep 10
      continue
    fi
    [ -z "$err" ] || echo "$err" >&2
    return "$rc"
  done
}

# CUDA toolkit: the image provides it under /usr/local/cuda (Debian's own
# packages are too old for sm_90a); say so clearly if it is not there.
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
    [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break
  done
fi
if ! command -v nvcc >/dev/null 2>&1; then
  echo "[setup] error: nvcc (CUDA toolkit >= 12.8, 13.x recommended) not found; install the CUDA toolkit" \
       "(https://developer.nvidia.com/cuda-downloads) or put it on PATH" >&2
  exit 1
fi

need=()
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-pip)
# GoogleTest for the test tiers only (tools/bench.sh sets MK_SETUP_TESTS=0: it builds none).
[ "${MK_SETUP_TESTS:-1}" = 0 ] || [ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
# RDMA headers: the verbs and libfabric backends compile against them (the
# libraries themselves are dlopen'ed at run time, so none is linked).
[ -f /usr/include/infiniband/verbs.h ] || need+=(libibverbs-dev)
[ -f /usr/include/rdma/fabric.h ] || need+=(libfabric-dev)
if [ "${#need[@]}" -gt 0 ]; then
  log "installing: ${need[*]}"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${need[@]}"
fi

# CMake >= 3.25.1 (CUDA architecture "90a": 3.24.0's check of architecture names could refuse it; 3.25.0's
# FindCUDAToolkit fails where the toolkit has no libnvptxcompiler_static.a, on CUDA::nvptxcompiler_static).
cmake_ok() {
  local v
  v=$(cmake --version 2>/dev/null | head -1 | awk '{print $3}')
  [[ "$v" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] && [ "$(printf '%s\n3.25.1\n' "$v" | sort -V | head -1)" = "3.25.1" ]
}
# Where apt's is older (Ubuntu 22.04: 3.22), CMake from PyPI into a venv of this tree, .venv-cmake, never into
# the system's Python (which may have no pip, or refuse: PEP 668); .cmake-bin holds only its cmake and ctest, and
# tools/build.sh and tools/test.sh put that folder first on PATH (the venv's python stays off it).
_mk_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# (one that runs: a tree moved with its .venv-cmake has scripts naming the old path; then made again below)
"$_mk_root/.cmake-bin/cmake" --version >/dev/null 2>&1 && export PATH="$_mk_root/.cmake-bin:$PATH"
if ! cmake_ok; then
  log "system CMake is older than 3.25.1; installing CMake from PyPI into .venv-cmake"
  python3 -c 'import ensurepip' 2>/dev/null || {
    apt_get update -qq
    apt_get install -y -qq --no-install-recommends python3-venv
  }
  python3 -m venv --clear "$_mk_root/.venv-cmake"
  "$_mk_root/.venv-cmake/bin/python3" -m pip install -q 'cmake>=3.25.1,<4'
  mkdir -p "$_mk_root/.cmake-bin"
  ln -sf ../.venv-cmake/bin/cmake "$_mk_root/.cmake-bin/cmake"
  ln -sf ../.venv-cmake/bin/ctest "$_mk_root/.cmake-bin/ctest"
  export PATH="$_mk_root/.cmake-bin:$PATH"
  cmake_ok || { echo "[setup] error: CMake >= 3.25.1 not available" >&2; exit 1; }
fi
unset _mk_root

# The tests' Python packages (pytest, pyflakes, cuobjdump + nvdisasm wheels, torch) go into a venv,
# .venv-test (tools/setup_test_python.sh, run by tools/test.sh): never into the system's Python, which
# Debian and Ubuntu mark externally managed (PEP 668). Here only venv itself.
python3 -c 'import venv, ensurepip' 2>/dev/null || { apt_get update -qq; apt_get install -y -qq python3-venv; }

# NCCL headers/libraries for the benchmark baselines (CUDA images ship them).
if [ ! -f /usr/local/cuda/include/nccl.h ] && [ ! -f /usr/include/nccl.h ]; then
  echo "[setup] error: NCCL (nccl.h, libnccl.so) not found in /usr/local/cuda or /usr; install NVIDIA's" \
       "libnccl-dev for CUDA 13, or configure with -DMK_BUILD_BENCH=OFF to build without the benchmark" >&2
  exit 1
fi
log "ok: $(nvcc --version | tail -1), $(cmake --version | head -1), $(g++ --version | head -1)"
