#!/usr/bin/env bash
# `pip install .` into a fresh virtualenv, then the package tests against the
# installed package (not the source tree). Usage: tools/check_pip_install.sh VENV_DIR
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:?usage: check_pip_install.sh VENV_DIR}"
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
rm -rf "$venv"
python3 -m venv "$venv"
# The install takes pytest and the build backend (scikit-build-core) from the package index: a machine that
# cannot reach it (the lent GPU machines have no internet) skips this, saying so, rather than failing.
if ! "$venv/bin/pip" index versions pytest --retries 0 --timeout 15 >/dev/null 2>&1; then
  echo "SKIPPED: the package index is not reachable from here (pip index versions pytest failed); this test" \
       "installs pytest and scikit-build-core from it"
  exit 77
fi
"$venv/bin/pip" install -q pytest "$repo"
cd "$venv"
unset MK_LIBRARY PYTHONPATH
MK_EXPECT_INSTALLED=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/tests/python"
