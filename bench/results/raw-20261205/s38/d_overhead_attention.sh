# call D (session 38): the host cost per call from Python at W = 1 (LaunchOrder's event record is new in
# every plan call; 2026-12-01's figures are the before) and the one-GPU attention engine against SDPA
# (issue 7's engine target; the bench's timing now hides host launch work behind a GPU sleep).
mkdir -p $OUT/d
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 150 torchrun --standalone --nproc_per_node=1 bench/python_overhead.py --out $OUT/d > $OUT/d/python_overhead.log 2>&1
echo "python_overhead rc=$?"; tail -30 $OUT/d/python_overhead.log
timeout 300 python3 bench/attention_bench.py --out $OUT/d > $OUT/d/attention.log 2>&1
echo "attention_bench rc=$?"; tail -32 $OUT/d/attention.log
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
