#!/usr/bin/env bash
# Sets up, builds and runs every test tier through ctest. On a machine without
# a GPU the gpu and dist tiers report "Skipped" (exit 77) and the CPU tier runs.
# Arguments go to ctest. A -L label regex that matches none of the tests' labels is refused here, before the
# minutes of set-up and build; ctest runs with --no-tests=error, so a selection that matches no test (a -R typo)
# fails rather than printing "No tests were found!!!" and exiting 0.
set -euo pipefail
cd "$(dirname "$0")/.."
labels=$(grep -rhoE 'LABELS +[A-Za-z0-9_]+' tests --include=CMakeLists.txt --include='*.cmake' | awk '{print $2}' |
         sort -u | tr '\n' ' ' || true)
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    -L | --label-regex)
      [ -n "$labels" ] || break  # (none found: leave the check to ctest)
      if [ $((i + 1)) -ge ${#args[@]} ] || ! grep -qE -- "${args[i + 1]}" <<< "${labels// /$'\n'}"; then
        echo "[test] ${args[i]} ${args[i + 1]-(no value)}: matches none of the tests' labels (${labels% });" \
             "nothing was set up, built or run" >&2
        exit 2
      fi ;;
  esac
done
tools/setup.sh
test_python=$(tools/setup_test_python.sh)
tools/build.sh -DMK_TEST_PYTHON="$test_python"
source tools/gpu_env.sh
.cmake-bin/ctest --version >/dev/null 2>&1 && export PATH="$PWD/.cmake-bin:$PATH"  # (setup.sh: PyPI's CMake)
smi_rc=0
smi=$(timeout -k 5 20 nvidia-smi -L 2>/dev/null) || smi_rc=$?  # (bounded: a hung driver must not hang the tests)
if [ "$smi_rc" -eq 124 ] || [ "$smi_rc" -eq 137 ]; then
  echo "[test] nvidia-smi -L did not answer within 20 s (a hung GPU driver?): taken as no GPU"
fi
if ! grep -q '^GPU' <<< "$smi"; then
  echo "[test] no GPU on this machine: the gpu and dist tiers will report 'Skipped' (exit 77);"
  echo "[test] run them on a GPU machine with tools/test.sh or, from a copied build, tools/gpu_test.sh"
elif [ "$(grep -c '^GPU' <<< "$smi")" -eq 1 ]; then
  echo "[test] one GPU: the dist tier (a GPU per rank) will report 'Skipped' (exit 77); tools/gpu_test.sh runs it"
  echo "[test] with the ranks sharing the GPU (MK_SHARE_GPUS=1, correctness only)"
fi
ctest --test-dir build --output-on-failure --timeout 600 --no-tests=error "$@"
