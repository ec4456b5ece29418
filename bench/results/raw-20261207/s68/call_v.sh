# Session 68, with ~5 min of device time left (too little for call_t.sh's whole tools/test.sh): the set-up part of
# tools/test.sh after 3658fb7 in a copy of the tree without build/ or .venv-test (tools/setup.sh, then
# tools/setup_test_python.sh, whose failure stopped call 2), then the Python tests under the .venv-test it made
# (torch and pytest come from the machine's python3 venv through the new .pth file), against the library built on
# the CPU machine and carried (build/lib). Bounded to ~3.5 min.
set -u
repo=$PWD
fresh=/tmp/mk-fresh-v; rm -rf "$fresh"; mkdir -p "$fresh"
tar --exclude=./build --exclude='./build-*' --exclude=./.venv-test --exclude=./.carry -cf - . | tar -xf - -C "$fresh"
cd "$fresh"
t0=$(date +%s)
timeout -k 5 60 tools/setup.sh > "${OUT:-/tmp}/setup.log" 2>&1; echo "=== tools/setup.sh: rc $? ($(( $(date +%s) - t0 )) s)"
py=$(timeout -k 5 90 tools/setup_test_python.sh 2> "${OUT:-/tmp}/setup_test_python.log"); rc=$?
echo "=== tools/setup_test_python.sh: rc $rc, printed '$py' ($(( $(date +%s) - t0 )) s); its messages:"
sed 's/^/  /' "${OUT:-/tmp}/setup_test_python.log" | grep -v "Retrying" | cut -c1-300
[ "$rc" = 0 ] || exit 1
"$py" -c 'import torch, pytest; print("=== .venv-test imports torch", torch.__version__, "from", torch.__file__, "and pytest", pytest.__version__)'
source tools/gpu_env.sh
export PYTHONPATH="$fresh/python" MK_LIBRARY="$repo/build/lib/libmkernel.so"
timeout -k 5 60 "$py" -m pytest -q -rs -p no:cacheprovider tests/python/gpu 2>&1 | tail -4
echo "=== gpu tests rc ${PIPESTATUS[0]} ($(( $(date +%s) - t0 )) s)"
timeout -k 5 70 "$py" -m pytest -q -p no:cacheprovider --ignore=tests/python/gpu tests/python 2>&1 | tail -3
echo "=== cpu python tests rc ${PIPESTATUS[0]} ($(( $(date +%s) - t0 )) s)"
