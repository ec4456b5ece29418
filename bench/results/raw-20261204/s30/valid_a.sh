# call A (session 30): HEAD cfa9d27 (d3560d4, da8c707, 05089d8 never ran on a GPU): the compiled tier and the
# fabric part of tools/gpu_test.sh; then the TP plans' fused machinery at W = 1 against cuBLAS (current figures).
# Carries build/bin build/lib .carry/rdma.
mkdir -p $OUT/a
source tools/gpu_env.sh; source tools/gpu_steps.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled fabric > $OUT/a/gpu_test.log 2>&1
grep -h '^=== [PFS]' $OUT/a/gpu_test.log
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
MK_TP_SINGLE_RANK=fused timeout 150 torchrun --standalone --nproc_per_node=1 bench/tp_engine_1gpu.py --out $OUT/a/tp1 \
  --ms 1024,2048,4096,8192 > $OUT/a/tp1_fused.log 2>&1; echo "=== tp_engine_1gpu (fused) rc=$?"
grep -E "^\|" $OUT/a/tp1_fused.log | tail -28
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
