# call A (session 42): the Python host-cost question of session 41 (bench/results/session41-gpu-20261205.md,
# "Python host cost"). bench/python_overhead.py --breakdown under torchrun (1 rank), three rounds, each
# alternating the Python package of 84f47de (before session 40), 13215aa (before session 41) and this commit,
# all on this commit's library. The older packages: `git archive <commit> python/mkernel` into .carry/pkgs/<commit>.
# Carries build/bin build/lib .carry/pkgs. MK_AB_ROUNDS (default 3) sets the rounds.
mkdir -p $OUT/a
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv > $OUT/a/smi.txt 2>&1
for round in $(seq 1 ${MK_AB_ROUNDS:-3}); do
  for v in 84f47de 13215aa head; do
    pp=.carry/pkgs/$v; [ $v = head ] && pp=python
    PYTHONPATH=$pp MK_LIBRARY=build/lib/libmkernel.so timeout 60 torchrun --standalone --nproc_per_node=1 \
      bench/python_overhead.py --breakdown --out $OUT/a/$v-$round > $OUT/a/$v-$round.log 2>&1
    echo "$v round $round rc=$?"
  done
done
python3 - $OUT/a <<'PY'
import glob, os, re, sys, collections
rows = collections.OrderedDict()
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-*", "python-overhead-*.md"))):
    v, r = os.path.basename(os.path.dirname(f)).split("-")
    for line in open(f):
        m = re.match(r"\| (.+) \| ([0-9.na]+) \|$", line.strip())
        if m and m.group(1) != "call":
            rows.setdefault(m.group(1), {}).setdefault(v, []).append(m.group(2))
print("| call | 84f47de | 13215aa | head |\n|---|---|---|---|")
for name, d in rows.items():
    print(f"| {name} | " + " | ".join(" / ".join(d.get(v, [])) for v in ("84f47de", "13215aa", "head")) + " |")
PY
tar czf $OUT/a-out.tgz -C $OUT a; rm -rf $OUT/a
