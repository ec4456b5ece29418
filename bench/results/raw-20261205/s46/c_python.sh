# call C (session 46): `tools/gpu_test.sh python` at the session's Python changes (the op modules' torch >= 2.4
# check on import, mkernel/_torch_req.py; every torch test imports through it; torchrun.main's eager module
# loading and reported() on a closed communicator) and the library changes of call B (torchrun --standalone:
# Communicator.from_env takes a derived bootstrap port where the store's is 32768 or above; the custom ops'
# dense16 copies; the plan constructors' argument checks).
# Carries build/bin build/lib.
mkdir -p $OUT/c
source tools/gpu_env.sh; source tools/gpu_steps.sh
timeout 570 tools/gpu_test.sh python > $OUT/c/gpu_test.log 2>&1
echo "gpu_test rc=$?"
grep -h '^=== [PFS]' $OUT/c/gpu_test.log | cut -c1-250
grep -h "FAILED\|Failure\|timed out\|HUNG\|Error\|passed\|failed" $OUT/c/gpu_test.log | cut -c1-300 | head -30
tar czf $OUT/c-out.tgz -C $OUT c; rm -rf $OUT/c
