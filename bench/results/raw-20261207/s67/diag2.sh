# Session 67, call 23: the backtrace of call 22's segmentation fault (mk_attention_fwd from Python, library built on
# this machine) under cuda-gdb (no gdb here; cuda-gdb debugs host code too). Bounded to ~3 min.
set -u
fresh=/tmp/mk-fresh
if [ ! -f "$fresh/build/lib/libmkernel.so" ]; then
  rm -rf "$fresh"; mkdir -p "$fresh"
  tar --exclude=./build --exclude='./build-*' --exclude=./.venv-test --exclude=./.carry -cf - . | tar -xf - -C "$fresh"
  (cd "$fresh" && MK_BUILD_JOBS=16 timeout 100 tools/build.sh -DMK_BUILD_TESTS=OFF -DMK_BUILD_BENCH=OFF \
     > "${OUT:-/tmp}/build2.log" 2>&1); echo "build rc $?"
fi
cd "$fresh"
source tools/gpu_env.sh
timeout -k 5 120 cuda-gdb -q -batch -ex 'set pagination off' -ex 'set confirm off' -ex run -ex 'bt 25' \
  -ex 'info registers rip' -ex 'x/6i $pc-12' --args python3 bench/attention_bench.py --quick 2>&1 |
  grep -v "^\[New Thread\|^\[Thread .* exited\|^\[Detaching" | tail -60
