# call E (session 30): bench/plan_cost.py at 202b87a+ (what a new shape costs: the first call, which makes the
# plan, against the next; close_plans), W = 1 and W = 2 sharing the GPU. Carries build/bin build/lib.
mkdir -p $OUT/e
source tools/gpu_env.sh
export PYTHONPATH=$PWD/python MK_LIBRARY=$PWD/build/lib/libmkernel.so
timeout 100 torchrun --standalone --nproc_per_node=1 bench/plan_cost.py --out $OUT/e > $OUT/e/w1.log 2>&1; echo "=== W=1 rc=$?"
MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 150 torchrun --standalone --nproc_per_node=2 bench/plan_cost.py --out $OUT/e > $OUT/e/w2.log 2>&1; echo "=== W=2 shared rc=$?"
cat $OUT/e/plan-cost-*.md; tail -3 $OUT/e/w1.log $OUT/e/w2.log | grep -iE "error|Traceback" 
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
