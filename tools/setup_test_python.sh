#!/usr/bin/env bash
# The Python the tests run (tools/test.sh calls this after tools/setup.sh):
# .venv-test beside the repository, a venv that sees the system's packages
# (pytest, pyflakes, and torch where the system has one), plus the pinned
# torch from PyPI where no torch imports there. With torch, the CPU tests of
# the torch ops run here too: argument checks before any collective, the
# fake implementations and shapes torch.compile traces, autograd wiring,
# dispatcher modes (FakeTensorMode, make_fx), the benchmark helpers. Without
# it they skip, saying so.
#   MK_TEST_TORCH=0   no torch install (~70 s and ~4.7 GB with its CUDA wheels)
# Prints the interpreter's path last; tests/CMakeLists.txt runs pytest with it.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "[setup-test-python] $*" >&2; }
torch_pin="torch==2.11.0"   # the GPU machine's version (CUDA 13.0 wheels on PyPI)
venv=.venv-test
case "${MK_TEST_TORCH:-1}" in 0|1) ;; *) log "error: MK_TEST_TORCH must be 0 or 1 (got '$MK_TEST_TORCH')"; exit 1;; esac
if [ ! -x "$venv/bin/python3" ] || ! "$venv/bin/python3" -c 'import sys' 2>/dev/null; then
  rm -rf "$venv"
  log "creating $venv (python3 -m venv --system-site-packages)"
  python3 -m venv --system-site-packages "$venv" >&2
fi
py="$PWD/$venv/bin/python3"
"$py" -c 'import pytest' 2>/dev/null || "$py" -m pip install -q pytest >&2
if v=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
  log "torch $v found"
elif [ "${MK_TEST_TORCH:-1}" = "0" ]; then
  log "MK_TEST_TORCH=0: no torch; the Python tests that need it will skip"
else
  log "installing $torch_pin into $venv (PyPI; MK_TEST_TORCH=0 skips this)"
  if ! "$py" -m pip install -q "$torch_pin" >&2; then
    log "error: pip could not install $torch_pin into $venv; rerun with MK_TEST_TORCH=0 to test without torch"
    exit 1
  fi
fi
echo "$py"
