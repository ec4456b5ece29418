# call B (session 55): the tools' audit fixes (ec825bd: gpu_test.sh's skip rule, the 2-GPU steps left out by name
# on one GPU, gpu_steps.sh's reaping after every step, mkrun's unreaped ranks and partial-skip rule) on the compiled
# tier; then the Python fast paths' added alignment / overlap checks (cabf260), timed side by side:
# bench/python_overhead.py with the package before them (.carry/oldpy, ebc3ff6's) and after, same build.
# Carries build/bin build/lib .carry/oldpy.
mkdir -p $OUT/b
source tools/gpu_env.sh; source tools/gpu_steps.sh
MK_GPU_TEST_STEP_S=230 timeout 360 tools/gpu_test.sh compiled > $OUT/b/compiled.log 2>&1
echo "compiled rc=$?"
grep -h '^=== [PFS]' $OUT/b/compiled.log | cut -c1-220
grep -h "FAILED\|Failure\|timed out\|HUNG\|mkrun:" $OUT/b/compiled.log | cut -c1-300 | head -20
for pkg in old new; do
  d=$PWD/python; [ $pkg = old ] && d=$PWD/.carry/oldpy/python
  mkdir -p $OUT/b/overhead-$pkg
  step_s=100 run env PYTHONPATH="$d" MK_LIBRARY="$PWD/build/lib/libmkernel.so" python3 -m torch.distributed.run \
      --standalone --nproc_per_node=1 bench/python_overhead.py --out $OUT/b/overhead-$pkg > $OUT/b/overhead-$pkg.log 2>&1
  tail -3 $OUT/b/overhead-$pkg.log
done
for pkg in old new; do echo "--- $pkg"; grep -h '^| ' $OUT/b/overhead-$pkg/*.md | grep -v '^| call\|^|---'; done
tar czf $OUT/b-out.tgz -C $OUT b; rm -rf $OUT/b
