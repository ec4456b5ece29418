# call C (session 55; call B's script, never started: no machine): one call for all of the session's changes.
# 1. `tools/gpu_test.sh compiled` with the audited tools (ec825bd, a7c19ec: the skip rule, the 2-GPU steps left out
#    by name on one GPU, gpu_steps.sh's reaping after every step, mkrun's unreaped ranks and partial-skip rule) and
#    the bounded log writer (0b2c141, a7c19ec) in every test process.
# 2. The Python package's fast-path / plan-method checks (cabf260, a7c19ec) on a GPU: pytest tests/python/gpu and
#    torchrun dist_tp_check.py (2 ranks sharing the GPU), through gpu_steps' run.
# 3. bench/python_overhead.py (torchrun, 1 rank) with the package before the session (.carry/oldpy: ebc3ff6's) and
#    after, same build, side by side.
# Carries build/bin build/lib .carry/oldpy.
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 330 tools/gpu_test.sh compiled > $OUT/c/compiled.log 2>&1
echo "compiled rc=$?"
grep -h '^=== ' $OUT/c/compiled.log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG\|mkrun:" $OUT/c/compiled.log | cut -c1-300 | head -20
lib=MK_LIBRARY=$PWD/build/lib/libmkernel.so
{
  step_s=80 run env PYTHONPATH=$PWD/python $lib python3 -m pytest -q -rs -p no:cacheprovider tests/python/gpu
  step_s=60 run env PYTHONPATH=$PWD/python $lib MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 python3 -m torch.distributed.run \
      --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py
  for pkg in old new; do
    d=$PWD/python; [ $pkg = old ] && d=$PWD/.carry/oldpy/python
    mkdir -p $OUT/c/overhead-$pkg
    step_s=60 run env PYTHONPATH="$d" $lib python3 -m torch.distributed.run --standalone --nproc_per_node=1 \
        bench/python_overhead.py --out $OUT/c/overhead-$pkg
  done
} > $OUT/c/python.log 2>&1
grep -h '^=== [PFS]' $OUT/c/python.log | cut -c1-200
grep -h "passed\|failed" $OUT/c/python.log | head -5
for pkg in old new; do echo "--- $pkg"; grep -h '^| ' $OUT/c/overhead-$pkg/*.md | grep -v '^| call\|^|---'; done
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
