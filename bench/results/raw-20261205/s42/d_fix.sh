# call D (session 42): after calls A-C. mk_gpu_tests (its TpSingleRank.ARefusedCudaCallLeavesNoErrorForTheNextRun
# failed in call B: the refused device sync's message named reported_device_sync; MK_DEVICE_SYNC keeps
# "cudaDeviceSynchronize() failed"), the torch ops' GPU tests (gemm's new fast path: the cached workspace need
# skips the capture query), then python_overhead.py alternating 84f47de's package and this one, MK_AB_ROUNDS rounds (default 2).
# Carries build/bin build/lib .carry/pkgs.
mkdir -p $OUT/d
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv > $OUT/d/smi.txt 2>&1
timeout --foreground 120 build/bin/mk_gpu_tests > $OUT/d/mk_gpu_tests.log 2>&1; echo "mk_gpu_tests rc=$?"
grep -h "PASSED\|FAILED" $OUT/d/mk_gpu_tests.log | head -8
PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so timeout --foreground 150 python3 -m pytest -q -rs -p no:cacheprovider \
  tests/python/gpu/test_ops_gpu.py > $OUT/d/pytest_ops.log 2>&1; echo "pytest test_ops_gpu rc=$?"; tail -2 $OUT/d/pytest_ops.log
for round in $(seq 1 ${MK_AB_ROUNDS:-2}); do
  for v in 84f47de head; do
    pp=.carry/pkgs/$v; [ $v = head ] && pp=python
    PYTHONPATH=$pp MK_LIBRARY=build/lib/libmkernel.so timeout 60 torchrun --standalone --nproc_per_node=1 \
      bench/python_overhead.py --breakdown --out $OUT/d/$v-$round > $OUT/d/$v-$round.log 2>&1
    echo "$v round $round rc=$?"
  done
done
python3 - $OUT/d <<'PY'
import glob, os, re, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-*", "python-overhead-*.md"))):
    v = os.path.basename(os.path.dirname(f)).split("-")[0]
    for line in open(f):
        m = re.match(r"\| (.+) \| ([0-9.na]+) \|$", line.strip())
        if m and m.group(1) != "call" and not m.group(1).startswith("piece: a."):
            rows.setdefault(m.group(1), {}).setdefault(v, []).append(m.group(2))
print("| call | 84f47de | head |\n|---|---|---|")
for name, d in rows.items():
    print(f"| {name} | " + " / ".join(d.get("84f47de", [])) + " | " + " / ".join(d.get("head", [])) + " |")
PY
tar czf $OUT/d-out.tgz -C $OUT d; rm -rf $OUT/d
