#!/usr/bin/env bash
# tools/setup_test_python.sh where `python3` is itself a venv holding pytest (and torch), on a machine without
# PyPI: the GPU machine's python3 is /opt/torch/.venv's. Before 2026-12-07, .venv-test (made from it with
# --system-site-packages) saw the base interpreter's packages, not that venv's, tried to pip-install pytest, and
# tools/test.sh stopped there (session 68, call 2). This runs a copy of the script in a scratch tree with python3 an
# outer venv holding stand-ins (a `pytest` package reached through a .pth file, the nvidia-cuda-nvdisasm wheel's
# layout) and pip pointed at a closed port, and checks that .venv-test imports the outer venv's pytest, that the
# missing pyflakes gives a warning (not an error), and that a second run (.venv-test there already) does the same.
# No GPU; ~10 s.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python3 -c 'import ensurepip, venv' 2>/dev/null || { echo "SKIP: this python3 has no venv/ensurepip"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mk-test-python-venv.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python3 -m venv --without-pip "$tmp/outer"
site=$("$tmp/outer/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# pytest reached through a .pth file of the outer venv (as an editable install or a borrowed path is), nvidia's
# wheel layout directly in its site-packages.
mkdir -p "$tmp/elsewhere/pytest" "$site/nvidia/cu13/bin" "$tmp/repo/tools"
echo 'STAND_IN = "outer venv"' > "$tmp/elsewhere/pytest/__init__.py"
echo "$tmp/elsewhere" > "$site/borrowed.pth"
for t in cuobjdump nvdisasm; do
  printf '#!/bin/sh\nexit 1\n' > "$site/nvidia/cu13/bin/$t"; chmod +x "$site/nvidia/cu13/bin/$t"
done
cp "$repo/tools/setup_test_python.sh" "$tmp/repo/tools/"
fail=0
for round in 1 2; do
  rc=0
  out=$(cd "$tmp" && env PATH="$tmp/outer/bin:$PATH" PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_RETRIES=0 \
        PIP_TIMEOUT=2 PIP_NO_INPUT=1 MK_TEST_TORCH=0 repo/tools/setup_test_python.sh 2> "$tmp/log") || rc=$?
  echo "--- round $round: setup_test_python.sh exit $rc; its messages:"; sed 's/^/  /' "$tmp/log"
  py=$(tail -n 1 <<< "$out")
  if [ "$rc" -ne 0 ] || [ "$py" != "$tmp/repo/.venv-test/bin/python3" ]; then
    echo "FAIL: round $round: exit $rc, printed '$py' (expected $tmp/repo/.venv-test/bin/python3)"; fail=1; continue
  fi
  got=$("$py" -c 'import pytest; print(getattr(pytest, "STAND_IN", pytest.__file__))' 2>&1) || true
  [ "$got" = "outer venv" ] || { echo "FAIL: round $round: .venv-test's pytest is not the outer venv's: $got"; fail=1; }
  grep -q "python3 is a venv" "$tmp/log" || { echo "FAIL: round $round: no 'python3 is a venv' message"; fail=1; }
  grep -q "warning: pip could not install pyflakes" "$tmp/log" ||
    { echo "FAIL: round $round: no warning for the pyflakes pip could not install"; fail=1; }
done
[ "$fail" = 0 ] && echo "PASS: .venv-test sees the packages of a python3 that is a venv, offline"
exit "$fail"
