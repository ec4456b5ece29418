# call D (session 39): the host cost of a causal one-GPU attention call (claimed units: pool allocation, memset,
# free) against the same call walked statically, from bench/python_overhead.py at W = 1. Carries build/bin build/lib.
mkdir -p $OUT/d
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 150 torchrun --standalone --nproc_per_node=1 bench/python_overhead.py --out $OUT/d > $OUT/d/python_overhead.log 2>&1
echo "python_overhead rc=$?"; grep -h "attention\|C ABI" $OUT/d/python_overhead.log | head -20
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
