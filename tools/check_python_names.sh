#!/usr/bin/env bash
# Names a Python file uses that nothing defines (a missing import, a typo) fail only when that line runs:
# on a GPU, in an error path, in a benchmark a scarce device session runs. pyflakes finds them statically;
# this fails on those findings only (not on unused imports and the like). tools/setup_test_python.sh installs pyflakes.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="$("$root/tools/test_python.sh")"
if ! "$py" -m pyflakes --version >/dev/null 2>&1; then
  echo "SKIPPED: pyflakes is not installed for $py (tools/setup_test_python.sh installs it into .venv-test where" \
       "PyPI is reachable, and warned where it could not)"; exit 77
fi
all="$("$py" -m pyflakes "$root/python/mkernel" "$root/bench" "$root/tools" "$root/tests/python" 2>&1)"
rc=$?
# pyflakes exits 1 for findings; a crash exits 1 too (Python's status for an uncaught exception) but leaves a
# traceback, and other failures exit above 1: either means the files were not checked, not that they are clean.
if [ $rc -gt 1 ] || grep -q '^Traceback (most recent call last):' <<< "$all"; then
  tb="$(sed -n '/^Traceback (most recent call last):/,$p' <<< "$all")"
  echo "${tb:-$(tail -n 20 <<< "$all")}"
  echo "check_python_names: pyflakes itself failed (exit $rc; its output above): the names were not checked"
  exit 1
fi
out="$(grep -E "undefined name|undefined local|referenced before assignment|syntax error|invalid syntax" <<< "$all")"
if [ -n "$out" ]; then
  echo "$out"
  echo "check_python_names: the names above are used but never defined"
  exit 1
fi
echo "check_python_names: no undefined names in python/mkernel, bench, tools, tests/python"
