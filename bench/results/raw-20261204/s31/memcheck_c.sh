# call C (session 31): compute-sanitizer memcheck over the one-GPU device code (tools/sanitize_gpu.sh, new):
# mk_gpu_tests (GEMM engine, hooks, TP plans at W = 1, signals, copies, agents) and the attention engine from
# Python. Tree: 6794053 (device-support check) + the script. Carries build/bin build/lib.
mkdir -p $OUT/c
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
compute-sanitizer --version | head -3
tools/sanitize_gpu.sh memcheck $OUT/c gpu attn; echo "sanitize rc=$?"
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
