#!/usr/bin/env bash
# Installs what mkernel's build needs and is missing (idempotent; apt-get on
# Debian/Ubuntu; CMake from PyPI into .venv-cmake if the system one is too old).
# Run by tools/test.sh and tools/bench.sh (its PATH changes stay here: tools/build.sh and
# tools/test.sh put .cmake-bin on PATH themselves).
#   MK_SETUP_TESTS=0   leave GoogleTest and the tests' venv module out (tools/bench.sh: it builds no test tier)
set -euo pipefail

log() { echo "[setup] $*"; }

SUDO=""
# (sudo only where it needs no password: one that asks would wait on a terminal, or fail, mid-install)
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
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
# can_install: whether this machine can install Debian packages here (apt-get, and root or a password-free sudo).
can_install() { command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; }; }
# install_packages WHY PKGS...: the Debian packages PKGS (apt-get update, then install), or, where this machine cannot
# (no apt-get; not root and no password-free sudo), an error that names them and what they are for (WHY), before
# any apt-get.
install_packages() {
  local why=$1
  shift
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "[setup] error: missing $why, and this machine has no apt-get: install the Debian/Ubuntu packages $*" \
         "(or their equivalents) with its package manager, then run this again" >&2
    exit 1
  fi
  if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
    echo "[setup] error: missing $why; installing needs root (not root here, and no password-free sudo): as root," \
         "run: apt-get update && apt-get install -y --no-install-recommends $*; then run this again" >&2
    exit 1
  fi
  log "installing: $*"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "$@"
}

# CUDA toolkit 13.x (README; the test and benchmark scripts load libcublas.so.13): the image provides it under
# /usr/local/cuda (Debian's own packages are too old for sm_90a); say so clearly if it is not there. The same nvcc
# as tools/build.sh takes: /usr/local/cuda's first (a distribution's older nvcc may be on PATH too), else the one
# on PATH, else /usr/local/cuda-13.0's.
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
elif ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda-13.0/bin/nvcc ]; then
  export PATH="/usr/local/cuda-13.0/bin:$PATH"
fi
if ! command -v nvcc >/dev/null 2>&1; then
  echo "[setup] error: nvcc (CUDA toolkit 13.x) not found; install the CUDA toolkit" \
       "(https://developer.nvidia.com/cuda-downloads) or put it on PATH" >&2
  exit 1
fi
# (|| true: an nvcc whose text has no "release X.Y" is refused below, saying so, not ended by set -e -o pipefail)
cuda_version=$(nvcc --version 2>/dev/null | grep -oE 'release [0-9]+\.[0-9]+' | head -1 | awk '{print $2}' || true)
if ! [[ "${cuda_version%%.*}" =~ ^[0-9]+$ ]] || [ "${cuda_version%%.*}" -lt 13 ]; then
  echo "[setup] error: $(command -v nvcc) is CUDA ${cuda_version:-of an unknown release}; mkernel needs the CUDA" \
       "toolkit 13.x (put its bin/ first on PATH, or install it to /usr/local/cuda)" >&2
  exit 1
fi

need=()
why=()
command -v g++ >/dev/null 2>&1 || { need+=(g++); why+=("g++"); }
command -v ninja >/dev/null 2>&1 || { need+=(ninja-build); why+=("ninja"); }
command -v cmake >/dev/null 2>&1 || { need+=(cmake); why+=("cmake"); }
command -v python3 >/dev/null 2>&1 || { need+=(python3 python3-pip); why+=("python3"); }
# GoogleTest for the test tiers only (tools/bench.sh sets MK_SETUP_TESTS=0: it builds none).
[ "${MK_SETUP_TESTS:-1}" = 0 ] || [ -f /usr/include/gtest/gtest.h ] ||
  { need+=(libgtest-dev); why+=("GoogleTest (/usr/include/gtest/gtest.h)"); }
# RDMA headers: the verbs and libfabric backends compile against them (the libraries themselves are dlopen'ed at
# run time, so none is linked). Installed where this machine can; where it cannot, the build leaves those backends
# out (CMakeLists.txt: MK_NET_BACKENDS=auto), which jobs on one host do not need, and this says so.
# has_header H: whether <H> is found as CMake's configure will look (the C++ compiler's include path; without g++
# yet, /usr/include).
has_header() {
  if command -v g++ >/dev/null 2>&1; then echo "#include <$1>" | g++ -x c++ -fsyntax-only - >/dev/null 2>&1
  else [ -f "/usr/include/$1" ]; fi
}
rdma=()
rdma_why=()
has_header infiniband/verbs.h || { rdma+=(libibverbs-dev); rdma_why+=("the verbs headers (<infiniband/verbs.h>)"); }
has_header rdma/fabric.h || { rdma+=(libfabric-dev); rdma_why+=("the libfabric headers (<rdma/fabric.h>)"); }
# rdma_left_out WHY: says that the build leaves the RDMA backends out, and why.
rdma_left_out() {
  log "warning: missing $(printf '%s; ' "${rdma_why[@]}" | sed 's/; $//'), and $1: the build leaves those network" \
      "backends out. Jobs on one host do not need them; jobs across nodes over InfiniBand, RoCE, EFA or libfabric do" \
      "(as root: apt-get install ${rdma[*]}, then build again)"
}
if [ "${#need[@]}" -gt 0 ]; then
  why_text=$(printf '%s; ' "${why[@]}")
  install_packages "${why_text%; }" "${need[@]}"
fi
if [ "${#rdma[@]}" -gt 0 ]; then
  if ! can_install; then
    rdma_left_out "this machine cannot install ${rdma[*]} (no apt-get, or not root and no password-free sudo)"
  else
    # (optional: where apt fails, e.g. with no network, as on a GPU machine that reaches nothing, the build goes on)
    log "installing (optional, for the RDMA network backends): ${rdma[*]}"
    { apt_get update -qq && apt_get install -y -qq --no-install-recommends "${rdma[@]}"; } ||
      rdma_left_out "apt-get could not install ${rdma[*]} (its messages above)"
  fi
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
    install_packages "Python's venv module (for CMake from PyPI)" python3-venv
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
# Debian and Ubuntu mark externally managed (PEP 668). Here only venv itself, and only for the tests (tools/bench.sh
# makes no venv: a GPU machine without venv, and no apt, runs the benchmark).
[ "${MK_SETUP_TESTS:-1}" = 0 ] || python3 -c 'import venv, ensurepip' 2>/dev/null ||
  install_packages "Python's venv module (for the tests' .venv-test)" python3-venv

# Python >= 3.10 (pyproject.toml; the package, the benchmark's torch baselines and the Python tests).
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  py_version=$(python3 -c 'import platform; print(platform.python_version())' 2>/dev/null || echo "of no known version")
  echo "[setup] error: $(command -v python3) is Python $py_version; mkernel needs Python 3.10 or later" >&2
  exit 1
fi

# NCCL headers/libraries for the benchmark baselines (CUDA images ship them), where bench/CMakeLists.txt looks: the
# toolkit's own include folder (that of the nvcc above), then /usr/include.
cuda_root=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)
nccl_h=
for d in "$cuda_root/include" "$cuda_root/targets/x86_64-linux/include" "$cuda_root/targets/sbsa-linux/include" \
         /usr/include; do
  if [ -f "$d/nccl.h" ]; then nccl_h=$d/nccl.h; break; fi
done
# Else the nvidia-nccl wheel that pip's torch brings (cmake/find_nccl.cmake takes it in that order too).
if [ -z "$nccl_h" ]; then
  wheel=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  [ -n "$wheel" ] && [ -f "$wheel/include/nccl.h" ] && nccl_h=$wheel/include/nccl.h
fi
if [ -z "$nccl_h" ]; then
  echo "[setup] error: NCCL (nccl.h, libnccl.so) not found in $cuda_root/include, /usr/include or a Python wheel" \
       "(python3 -c 'import nvidia.nccl'); install NVIDIA's libnccl-dev for CUDA 13 (or pip's nvidia-nccl-cu13), or" \
       "configure with -DMK_BUILD_BENCH=OFF to build without the benchmark" >&2
  exit 1
fi
log "ok: $(nvcc --version | tail -1), $(cmake --version | head -1), $(g++ --version | head -1)"
