# Session 66, call 6: the run part of the README's benchmark command (tools/bench.sh --quick) on one GPU, from the
# build carried as `build/bin build/lib` (tools/bench.sh's set-up needs apt for the RDMA headers, which the lent
# machine lacks, and its build would redo build/ from source there): mkbench --quick at one rank (mkrun -n 1, as
# bench.sh on one GPU), then bench/attention_bench.py --quick. Reports under $OUT/bench. Bounded; ~3-5 min.
set -u
source tools/gpu_env.sh; source tools/gpu_steps.sh
out=${OUT:-/tmp}/bench; mkdir -p "$out"
step_s=330 run tools/mkrun -n 1 --timeout 320 build/bin/mkbench --quick --out "$out"
step_s=200 run env PYTHONPATH="$PWD/python" MK_LIBRARY="$PWD/build/lib/libmkernel.so" \
  python3 bench/attention_bench.py --quick --out "$out"
echo "fail=$fail"
