# Session 49: runs one of session 48's device scripts (a_tp.sh, b_bench.sh, c_least.sh) on HEAD's tools, tests and
# Python package, snapshotted into .carry/snap (git archive HEAD; carried) while helpers' uncommitted edits were
# in the working tree. Usage: bash bench/results/raw-20261206/s49/run_at_head.sh a_tp.sh
set -u
for d in tools python tests; do rm -rf "$d"; cp -r ".carry/snap/$d" "$d"; done
bash ".carry/snap/bench/results/raw-20261206/s48/$1"
