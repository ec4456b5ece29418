#!/usr/bin/env bash
# Names a Python file uses that nothing defines (a missing import, a typo) fail only when that line runs:
# on a GPU, in an error path, in a benchmark a scarce device session runs. pyflakes finds them statically;
# this fails on those findings only (not on unused imports and the like). tools/setup_test_python.sh installs pyflakes.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="$("$root/tools/test_python.sh")"
if ! "$py" -m pyflakes --version >/dev/null 2>&1; then
  echo "pyflakes is not installed for $py (tools/setup_test_python.sh installs it into .venv-test)"; exit 1
fi
out="$("$py" -m pyflakes "$root/python/mkernel" "$root/bench" "$root/tools" "$root/tests/python" 2>&1 |
       grep -E "undefined name|undefined local|referenced before assignment|syntax error|invalid syntax")"
if [ -n "$out" ]; then
  echo "$out"
  echo "check_python_names: the names above are used but never defined"
  exit 1
fi
echo "check_python_names: no undefined names in python/mkernel, bench, tools, tests/python"
