# Session 62: trap_share2.cu's pairs (see there), then the abort scenario with the ranks sharing the GPU by
# cudaIpcMemHandle (MK_SYMM_MODE=ipc) and by VMM (the default). Each process bounds its own wait at 15 s;
# the scenarios' bootstrap barrier at 20 s. ~4 min at worst.
set -u
source tools/gpu_env.sh
b=bench/results/raw-20261207/s62/trap_share2
pair() {  # mode, A's end, B's end, B's flags
  d=$(mktemp -d)
  echo "=== $1: A $2, B $3 ${4:-}"
  $b A $1 $2 $d & a=$!
  $b B $1 $3 $d 500 ${4:-} & bb=$!
  wait $a $bb
  rm -rf $d
}
pair vmm trap trap hn
for mode in vmm ipc none; do
  for ab in "trap trap" "return trap" "trap return"; do pair $mode $ab; done
done
pair vmm trap trap h
pair vmm trap trap n
for m in ipc vmm; do
  echo "=== mkernel abort scenario, MK_SYMM_MODE=$m, sharing"
  tools/mkrun -n 2 --timeout 40 env MK_TIMEOUT_MS=500 MK_SHARE_GPUS=1 MK_SYMM_MODE=$m MK_BOOTSTRAP_TIMEOUT_MS=20000 \
      build/bin/mk_dist_tests --abort-scenario
  echo "mkrun rc=$?"
done
