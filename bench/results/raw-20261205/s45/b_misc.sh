# call B (session 45): what session 44 left unrun on a GPU, one GPU: the ring bench at world 1 after its baselines
# moved to bench/ring_baselines.py (a8c4e07's import refactor), every variant, its LSE and sampled checks;
# mkbench --lead-cycles on 1x2 sharing the GPU (runs and checks; no timing meaning); mkernel.torchrun.main's
# refusal of NCCL with two ranks on one GPU; attention_bench --quick. Carries build/bin build/lib.
mkdir -p $OUT/b
source tools/gpu_env.sh
export PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so
timeout --foreground 200 torchrun --standalone --nproc_per_node=1 bench/torch_ring_attn_bench.py --quick --rounds 5 \
  --warmup 1 --out $OUT/b/res > $OUT/b/ring.log 2>&1
echo "ring world 1 rc=$?"; grep -h "check\|^| 1x1\|rror" $OUT/b/ring.log | cut -c1-300 | head -14
timeout --foreground 150 tools/mkrun -n 2 --timeout 140 env MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 MK_BENCH_OUT=$OUT/b/res \
  build/bin/mkbench --quick --iters 3 --warmup 1 --lead-cycles 2000000 ag_gemm gemm_rs gemm_ar > $OUT/b/lead.log 2>&1
echo "lead-cycles 1x2 shared rc=$?"; grep -h "lead\|check\|rror\|failed\|results written" $OUT/b/lead.log | cut -c1-220 | head -12
cat > $OUT/b/refuse.py <<'PY'
import mkernel.torchrun
def run(comm, rank, world):
    raise AssertionError("reached run(): the NCCL refusal did not happen")
if __name__ == "__main__":
    mkernel.torchrun.main(run, backend="nccl")
PY
MK_SHARE_GPUS=1 timeout --foreground 60 torchrun --standalone --nproc_per_node=2 $OUT/b/refuse.py > $OUT/b/refuse.log 2>&1
echo "refusal rc=$? (nonzero expected)"; grep -h "mkernel.torchrun\|AssertionError\|Duplicate" $OUT/b/refuse.log | cut -c1-300 | head -4
timeout --foreground 150 python3 bench/attention_bench.py --quick --out $OUT/b/res > $OUT/b/attention.log 2>&1
echo "attention rc=$?"; tail -4 $OUT/b/attention.log | cut -c1-250
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
