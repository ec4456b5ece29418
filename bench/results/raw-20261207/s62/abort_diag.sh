# Session 62: why the abort scenario with the 2 ranks sharing one GPU did not end (owed.sh's last step, rc 124:
# rank 0 reported the abort after 0.85 s, rank 1 printed its device timeout and then nothing).
# Runs it again in the background, and after 8 s dumps each rank's threads (state, wchan, cuda-gdb backtraces)
# and nvidia-smi. Then the same with CUDA_LAUNCH_BLOCKING=1.
# Every step bounded; ~90 s.
set -u
source tools/gpu_env.sh
dump() {
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv 2>&1 | head
  for p in $(pgrep -f 'build/bin/mk_dist_tests --abort-scenario' | grep -v "^$$\$"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = mk_dist_tests ] || continue
    echo "--- pid $p rank $(tr '\0' '\n' < /proc/$p/environ | grep '^RANK=')"
    for t in /proc/$p/task/*; do
      echo "  tid ${t##*/} $(cat $t/comm) state $(awk '{print $3}' $t/stat) wchan $(cat $t/wchan)"
    done
    timeout 40 cuda-gdb -batch -p $p -ex 'info threads' -ex 'thread apply all bt 14' 2>&1 |
        grep -v '^\[New\|^$' | head -120
  done
}
for variant in "" "CUDA_LAUNCH_BLOCKING=1"; do
  echo "===== variant: ${variant:-plain}"
  tools/mkrun -n 2 --timeout 75 env MK_TIMEOUT_MS=500 MK_SHARE_GPUS=1 $variant build/bin/mk_dist_tests \
      --abort-scenario & mk=$!
  sleep 8
  dump
  wait $mk; echo "mkrun rc=$?"
done
