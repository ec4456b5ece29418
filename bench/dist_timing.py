"""Helpers shared by the torchrun benchmarks (bench/torch_tp_bench.py,
bench/torch_ring_attn_bench.py): agreement and maxima over ranks, the timing
loop of MEASURING.md (CUDA events, a host sync + barrier + GPU sleep before
each call, or back to back after a barrier on the stream; variants rotated per
round in a balanced order, each call's time the max over ranks, then the median), and small report
helpers. Needs torch.distributed initialised (gloo for the
CPU all-reduces)."""
import importlib.util
import os
import socket
import statistics
import subprocess
import sys

import torch
import torch.distributed as dist

from gpu_clocks import SAMPLER  # (bench/, beside this file, is on the path wherever this module is)


def use_in_tree_package():
    """Makes `import mkernel` work in-tree without `pip install .`: where no mkernel package is installed, the one
    beside this folder (python/) goes on the path. An installed package wins."""
    if importlib.util.find_spec("mkernel") is None:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def call_order(n, r):
    """Round r's order of n calls, as mkbench's call_order (bench/timing.hpp): row r of a Williams design (0, 1,
    n-1, 2, n-2, ... shifted by r, reversed in every other block of n rounds when n is odd), so that within n rounds
    (2n for odd n) every call directly follows every other equally often. A cyclic shift gave each call the same
    predecessor every round, and under the power cap a call after a light one runs at higher clocks."""
    base = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    o = [(b + r) % n for b in base]
    if n % 2 and (r // n) % 2:
        o.reverse()
    return o


def config_label(info, hosts):
    """The report's config column and whether mkernel's nodes are emulated: its communicator's nodes x ranks per
    node (comm.info(): `info`), 1xW on one node, with " emu (mkernel)" where it sees more nodes than the job has
    `hosts` (MK_RANKS_PER_NODE: torch's baselines stay on one node's NVLink). (The label read MK_RANKS_PER_NODE
    itself: its declared default, 0, divided by zero, and a real run across nodes without it read as 1xW.)"""
    nodes, local = info["num_nodes"], info["local_size"]
    emulated = nodes > hosts
    return (f"{nodes}x{local} emu (mkernel)" if emulated else f"{nodes}x{local}"), emulated


def num_hosts():
    """How many hosts the job's ranks run on (collective: every rank calls it)."""
    names = [None] * dist.get_world_size()
    dist.all_gather_object(names, socket.gethostname())
    return len(set(names))


def max_over_ranks(values):  # CPU tensors: over gloo
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def agree(flag):
    """True on every rank iff flag is True on every rank."""
    return max_over_ranks([0.0 if flag else 1.0])[0] == 0.0


def short(e, limit=160):
    return f"{type(e).__name__}: {e}".replace("|", "/").replace("\n", " ")[:limit]


def fence():
    """Host sync + barrier: no rank starts the next call (e.g. rewrites its symmetric buffer) while
    another still reads it."""
    torch.cuda.synchronize()
    dist.barrier()


def gpu_lead(cycles):
    """The GPU spin before a timed call (--lead-cycles): mkernel's mk_gpu_spin on the current stream, as long as
    `cycles` take at the GPU's top SM clock, timed, so that ranks at different clocks leave it together (as
    mkbench's); torch.cuda._sleep, which counts cycles (ranks then start apart), where the library is not loaded."""
    try:
        from mkernel._lib import check, lib
    except ImportError:
        torch.cuda._sleep(cycles)
        return
    check(lib.mk_gpu_spin(cycles, torch.cuda.current_stream().cuda_stream))


def measure(fns, inputs, rounds, warmup, lead_cycles, device_barrier=None, per_round=None):
    """fns: name -> fn(input). One call of each per round; returns name -> ms: each timed call's time is the
    slowest rank's (the ranks start each call together, after a barrier: the slowest sets the step time), then
    the median over the rounds (MEASURING.md). device_barrier: None, each call after a host sync and a host
    barrier (the GPU rests between calls); else a callable that queues a barrier on the stream (a 1-element NCCL
    all-reduce), taken before each call instead, with no host sync inside the rounds: the calls then run back to
    back as mkbench's do, in the power-capped regime of sustained work (bench/gpu_clocks.py). per_round: a dict
    to fill with name -> each timed call's ms (its slowest rank's), in round order (round-by-round ratios:
    paired_ratio)."""
    names, n_in, k = list(fns), len(inputs), 0
    events = {n: [] for n in names}
    try:
        for r in range(warmup + rounds):
            if r == warmup:
                torch.cuda.synchronize()
                SAMPLER.start()  # the timed rounds' clocks (bench/gpu_clocks.py: the reports' clock line)
            for n in (names[i] for i in call_order(len(names), r)):  # balanced: no call always after another
                x = inputs[k % n_in]
                k += 1
                if device_barrier is None:
                    torch.cuda.synchronize()
                    dist.barrier()
                else:
                    device_barrier()
                if lead_cycles > 0:
                    gpu_lead(lead_cycles)
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fns[n](x)
                e.record()
                if r >= warmup:
                    events[n].append((s, e))
        torch.cuda.synchronize()
    finally:
        SAMPLER.stop()  # (a call that raised too: no thread left sampling into the next shape)
    per_call = max_over_ranks([s.elapsed_time(e) for n in names for s, e in events[n]])  # (one exchange)
    if per_round is not None:
        per_round.update({n: per_call[i * rounds:(i + 1) * rounds] for i, n in enumerate(names)})
    return {n: statistics.median(per_call[i * rounds:(i + 1) * rounds]) for i, n in enumerate(names)}


def paired_ratio(num, den):
    """(p10, median, p90) over the rounds of num[i] / den[i], two calls' per-round times from one measure()
    (nearest rank, as mkbench's paired_ratio); None without paired rounds. Both calls of a round share the
    GPU's clock, so the spread says whether a ratio of medians near 1 is a tie."""
    r = sorted(a / b for a, b in zip(num or [], den or []) if b > 0)
    if not r:
        return None
    q = lambda f: r[min(len(r) - 1, int(f * (len(r) - 1) + 0.5))]  # noqa: E731
    return q(0.1), q(0.5), q(0.9)


def mk_environment(environ=None):
    """Every MK_* variable set, sorted, "MK_A=1, MK_B=x" ("none"): a report's record of the knobs the run had (one
    that moves a time is seen beside it; mkbench's reports say the same, mk_environment)."""
    environ = os.environ if environ is None else environ
    return ", ".join(f"{k}={v}" for k, v in sorted(environ.items()) if k.startswith("MK_")) or "none"


def provenance():
    """What was measured, for a report's "commit ..." line (callers write the word): the mkernel library's own
    build commit (mk_build_commit) where it has one, else this tree's git commit (noting modified tracked files);
    this tree's git beside the build's where the two differ or the tree has changes the build lacks (a tree
    copied to another machine may carry a stale .git; an edited bench script is not in the library's build); the
    library's path and the start of its SHA-256."""
    import hashlib
    import os
    tree = sh("git", "rev-parse", "--short=12", "HEAD") or "unknown"
    if sh("git", "status", "--porcelain", "--untracked-files=no"):
        tree += " (tracked files modified)"
    try:
        import ctypes
        import mkernel
        from mkernel._lib import lib as _lib
        built = getattr(_lib, "mk_build_commit", None)
        if built is not None:
            built.restype, built.argtypes = ctypes.c_char_p, []
            built = built().decode()
        lib = mkernel.library_path
        with open(lib, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()[:12]
    except (ImportError, AttributeError, OSError):
        return f"{tree}, library {os.environ.get('MK_LIBRARY', 'unknown')}"
    if not built or built == "unknown":
        return f"{tree}, library {lib} (sha256 {digest})"
    same = tree.split()[0] == built.split("-")[0] and ("modified" in tree) == built.endswith("-dirty")
    return f"{built} (the library's build{'' if same else '; this tree: ' + tree}), library {lib} (sha256 {digest})"


def sh(*cmd):
    """First line of a command's output, or None."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return r.stdout.strip().split("\n")[0] if r.returncode == 0 and r.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None
