"""CPU (torch, no GPU): every benchmark script with a command line starts and prints its --help, so an import
that fails or an argument parser that breaks is found here, not in a scarce device session (the benches run
only there). dist_timing.py, ring_eta.py, ring_baselines.py, attn_ref.py and gpu_clocks.py are helper modules
without a command line."""
import os
import subprocess
import sys

import pytest

from torchops import torch_ops

pytest.importorskip("torch")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPTS = ["attention_bench.py", "plan_cost.py", "python_overhead.py", "ring_engine_1gpu.py",
           "torch_ring_attn_bench.py", "torch_tp_bench.py", "tp_engine_1gpu.py"]


def test_every_bench_script_is_listed_or_a_helper():
    helpers = {"dist_timing.py", "ring_eta.py", "ring_baselines.py", "attn_ref.py", "gpu_clocks.py"}
    found = {f for f in os.listdir(os.path.join(ROOT, "bench")) if f.endswith(".py")}
    assert found == set(SCRIPTS) | helpers, "a bench script was added or removed: list it in SCRIPTS or helpers"


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_help(script):
    if script == "plan_cost.py":
        torch_ops()  # (it imports mkernel's torch ops at its top: torch >= 2.4, or this case skips saying why)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script), "--help"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "usage:" in r.stdout, (r.returncode, r.stdout[-500:], r.stderr[-2000:])


def test_the_python_benches_call_order_is_mkbenchs_balanced_one():
    """dist_timing.call_order (the Python benches' round order) is a Williams design like bench/timing.hpp's:
    within n rounds (2n for odd n) every call directly follows every other equally often (a cyclic shift, the
    order before session 48, gave each call the same predecessor every round)."""
    bench = os.path.join(ROOT, "bench")
    sys.path.insert(0, bench)
    try:
        import importlib
        dt = importlib.import_module("dist_timing")
    finally:
        sys.path.remove(bench)
    for n in range(2, 12):
        rounds = n if n % 2 == 0 else 2 * n
        follows = {}
        for r in range(rounds):
            o = dt.call_order(n, r)
            assert sorted(o) == list(range(n)), (n, r, o)
            for a, b in zip(o, o[1:]):
                follows[(a, b)] = follows.get((a, b), 0) + 1
        counts = set(follows.values())
        assert len(follows) == n * (n - 1) and len(counts) == 1, (n, follows)
