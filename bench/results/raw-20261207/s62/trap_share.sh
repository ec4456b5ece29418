# Session 62: trap_share.cu's pairs (see there). Each pair runs at once on the one GPU; each process bounds its
# own wait at 20 s. ~2 min at worst.
set -u
source tools/gpu_env.sh
b=bench/results/raw-20261207/s62/trap_share
pair() {
  echo "=== A: $1 $2 | B: $3 $4"
  [ "$1" = none ] || $b A "$1" "$2" & a=$!
  $b B "$3" "$4" & bb=$!
  wait $a $bb
}
pair none none 500 printf-trap
pair 3000 return 500 printf-trap
pair 3000 trap 500 printf-trap
pair 800 printf-trap 500 printf-trap
pair 800 trap 500 trap
pair 800 return 500 printf-trap
nvidia-smi --query-gpu=compute_mode,name,driver_version --format=csv
