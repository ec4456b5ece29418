#!/usr/bin/env bash
# Prints the Python the tests' checks use: MK_TEST_PYTHON (ctest passes it), else .venv-test's where
# tools/setup_test_python.sh made it, else python3. (tools/check_python_names.sh, tools/check_ptxas.sh)
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${MK_TEST_PYTHON:-}" ]; then echo "$MK_TEST_PYTHON"
elif [ -x "$root/.venv-test/bin/python3" ]; then echo "$root/.venv-test/bin/python3"
else echo python3
fi
