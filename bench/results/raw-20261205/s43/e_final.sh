# call E (session 43): the bootstrap's step names (every dist tier bootstraps through them; ranks at different
# steps now fail at the root), the C ABI's handle counting (mk_gpu_tests CApiGpu.HandleLifetimesAreCheckedNotUndefined,
# dist_tp_check's buffer freed after close), and gemm_ptr's one-expression check (python_overhead.py, 41b7253's
# package and this one alternated, on one library). Carries build/bin build/lib .carry/pkgs.
mkdir -p $OUT/e
source tools/gpu_env.sh; source tools/gpu_steps.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/e/smi.txt 2>&1
MK_GPU_TEST_STEP_S=230 tools/gpu_test.sh compiled > $OUT/e/gpu_test.log 2>&1; echo "gpu_test compiled rc=$?"
grep -h '^=== [PFS]' $OUT/e/gpu_test.log | cut -c1-200
grep -h "FAILED\|Failure\|timed out\|HUNG" $OUT/e/gpu_test.log | cut -c1-300 | head -20
grep -h "CApiGpu" $OUT/e/gpu_test.log | head -4
PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so MK_SHARE_GPUS=1 MK_TIMEOUT_MS=60000 timeout 120 torchrun \
  --standalone --nproc_per_node=2 tests/python/gpu/dist_tp_check.py > $OUT/e/dist_tp_check.log 2>&1
echo "dist_tp_check 1x2 rc=$?"; tail -3 $OUT/e/dist_tp_check.log | cut -c1-300
for v in 41b7253 head head 41b7253; do
  pp=.carry/pkgs/$v; [ $v = head ] && pp=python
  n=$(ls -d $OUT/e/$v-* 2>/dev/null | wc -l)
  PYTHONPATH=$pp MK_LIBRARY=build/lib/libmkernel.so timeout 60 torchrun --standalone --nproc_per_node=1 \
    bench/python_overhead.py --breakdown --out $OUT/e/$v-$n > $OUT/e/$v-$n.log 2>&1
  echo "$v run $n rc=$?"
done
python3 - $OUT/e <<'PY'
import glob, os, re, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-*", "python-overhead-*.md"))):
    v = os.path.basename(os.path.dirname(f)).split("-")[0]
    for line in open(f):
        m = re.match(r"\| (.+) \| ([0-9.na]+) \|$", line.strip())
        if m and m.group(1) != "call" and not m.group(1).startswith("piece"):
            rows.setdefault(m.group(1), {}).setdefault(v, []).append(m.group(2))
print("| call | 41b7253 | head |\n|---|---|---|")
for name, d in rows.items():
    print(f"| {name} | " + " / ".join(d.get("41b7253", [])) + " | " + " / ".join(d.get("head", [])) + " |")
PY
tar czf $OUT/e-out.tgz -C $OUT e; rm -rf $OUT/e
