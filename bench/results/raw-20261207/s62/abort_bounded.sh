# Session 62: the abort scenario's own wait for its kernel is bounded (30 s): with the ranks sharing one GPU, where
# the driver loses one rank's trap, that rank now says so and exits 1 instead of waiting until mkrun's bound.
# ~40 s.
set -u
source tools/gpu_env.sh
t0=$SECONDS
tools/mkrun -n 2 --timeout 100 env MK_TIMEOUT_MS=500 MK_SHARE_GPUS=1 build/bin/mk_dist_tests --abort-scenario
echo "mkrun rc=$? after $((SECONDS - t0)) s"
