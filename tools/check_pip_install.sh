#!/usr/bin/env bash
# `pip install .` into a fresh virtualenv, then the package tests against the
# installed package (not the source tree). Usage: tools/check_pip_install.sh VENV_DIR
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:?usage: check_pip_install.sh VENV_DIR}"
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q pytest "$repo"
cd "$venv"
unset MK_LIBRARY PYTHONPATH
MK_EXPECT_INSTALLED=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/tests/python"
