#!/usr/bin/env python3
"""The open issues' benchmark targets, checked against benchmark reports.

    python3 tools/issue_targets.py [--strict] [--all] [--commit REV|any] [--gpu NAME|any] PATH [PATH ...]

PATH: report files or folders of them (e.g. the OUT of tools/issue_bench.sh). A report counts only if it was
measured on the H200 (MEASURING.md: "on the lent H200 machine"; the GPU its header or meta names): one of another
GPU, or that names none, is left out and noted once above the tables (--gpu any: every report counts, the rows of
each GPU in grids of their own, never merged). Unless --all (every report, each
whole), the reports of each kind and configuration are merged per row: of each op's M (one-GPU attention, ring:
each shape) the newest report's row counts (by the UTC time stamped in the name), so a newer partial run does not
hide an older one's other rows (give every folder of a run split over calls); each row is judged under its
report's name, the list of reports read says which rows an older report fills in, and rows merged from reports
of several commits are a miss. A row of the issue's grid that no report has is a miss (TP: M 1024-16384; ring
and one-GPU attention: the benches' default grids), as is a cell that failed and an attention row whose output
error err is not below 1e-2 or NaN, or whose LSE error is not below 1e-3 or not checked (no "lse err" column); a ring
row whose output check ("mkernel vs fp32 ...": O < 1e-2, LSE < 1e-3) failed, or that has no such column, is a wrong
output's (a miss). An mkbench run that failed (meta "failed") is the newest report of every TP op it
was asked for: an op it has no table of is a miss ("the run failed"), never older reports' rows:
  mkbench-*.json          (mkbench ag_gemm gemm_rs gemm_ar; 1x2 and 2x1)  issues [tp-ag-rs], [tp-ar]
  torch-tp-*.md           (bench/torch_tp_bench.py; 1x2)                   the PyTorch fused-op targets
  torch-ring-attn-*.md    (bench/torch_ring_attn_bench.py; 1x2, 2x1)      issue [ring-attn]
  attention-*.md          (bench/attention_bench.py; one GPU)             the ring-attn engine target
Prints one markdown table per issue: each target, where it was checked, and every row that missed it.
Ratios (eta, speedups, the GEMM+AR ideal) are recomputed from the reports' milliseconds and compared unrounded
(the reports print them rounded to 2 digits); misses print them to 4. eta = T_lb / T_mkernel, T_lb = max(compute
alone, comm alone) (MEASURING.md). On emulated nodes comm alone is mkernel's own collective, slower than the emulated
link: there T_comm is the smaller of it and the link floor, network bytes per GPU / MK_EMU_GBPS (the rate the report
records, mkbench's effective "emulated NIC" first, else the knob's default); a run whose link was not at
MEASURING.md's 50 GB/s per GPU is a miss. eta above 1 (the fused op beat both halves timed alone) meets the target and
is listed as a floor that is not tight. The floor each row used is listed at the end.
Across nodes, each row's network bytes per GPU measured by the proxy must equal the op's formula (to the
reports' 0.1 MB). A ring row's best baseline is recomputed from its columns: on emulated nodes only the
allgather-mk baselines (their K/V cross the emulated network; bench/torch_ring_attn_bench.py's
baseline_candidates) count, elsewhere every baseline; a column of those, or of the halves timed alone, that the
report lacks (a --only run) is a miss, and a cell that failed is no candidate, listed above the tables. Every report
read must record at least 20 timed rounds (MEASURING.md; a miss otherwise), and the list of reports gives each
one's commit and rounds: a report of another commit than the tree under test (--commit, default git HEAD; where
git cannot say, the newest report's) measured that code, unless no code a benchmark depends on changed between
the two (tools/git_commits.py; results, documents and tests may): a miss, with a warning above the tables, as are
a report with uncommitted changes (its library's build "-dirty", or the tree it ran from "tracked files modified":
"measured X-dirty", a commit of its own), reports of several commits judged together (a warning) and rows merged
from reports of several commits (a miss); --commit any: the tree's commit is not judged.
Each harness's other power regime (mkbench --lead-cycles: config "... rested"; torch_tp_bench.py --back-to-back:
"1x2 back-to-back"; torch_ring_attn_bench.py --lead-cycles 0: "1x2 no-lead") is its own configuration, judged beside
the default's rows, never instead of them. Where a
report gives the best baseline's time over mkernel's round by round, a miss says whether it is within the run's
spread (p90 above 1); the verdict stays the ratio of medians.
Runs of 4 or 8 ranks (2x2, 1x4, 2x4, 1x8: tools/issue_bench.sh multi-*) are judged row by row as above (a ring
layout on issue 9's quick grid, B 1 and S_local 8k); issue [multi-gpu-run] lists each op and the ring at both of
its layouts (2 x G/2 and 1 x G) that no report supplies. Issues 5-7's two-GPU reports (1x2, 2x1) are asked for
whatever else was given.
Exit status: 0; with --strict, 1 when a target was missed or a report the issues need is absent.
The targets are the issues' texts (`issues show 5` / 6 / 7); a report only supplies the numbers.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import git_commits  # noqa: E402  (tools/git_commits.py)
from issue_reports import (  # noqa: E402  (tools/issue_reports.py: reading the reports)
    TORCH_TP_OPS, all_nums, attention_rows, config_key, gpu_of, load_json, mkbench_config, mkbench_run_ops,
    mkbench_short, num, nums, provenance, ring_rows, stamp_key, torch_tp_rows, tp_op)
from issue_select import (  # noqa: E402  (tools/issue_select.py: the reports and rows judged)
    ATTN_GRID, KIND_NAMES, MACHINE_GPU, TP_M, Take, gaps, judges, kind_name, off_gpu, on_machine, part_op,
    read_note, report_rows, select)


TP_OPS = TORCH_TP_OPS  # AG+GEMM, GEMM+RS, GEMM+AR


def issue_of(op):
    """The issue a TP op's rows feed (None: the attention engine's, issue 7)."""
    return "7 [ring-attn]" if op is None else "6 [tp-ar]" if op == "GEMM+AR" else "5 [tp-ag-rs]"


# issue 7's grid (bench/torch_ring_attn_bench.py's defaults): B, Hkv, S_local, causal
RING_GRID = [(b, h, s, c) for b in (1, 4) for h in (32, 8) for s in (2048, 4096, 8192, 16384, 32768)
             for c in ("yes", "no")]

# issue 9's ring grid (tools/issue_bench.sh multi-ring: torch_ring_attn_bench.py --quick): B 1, S_local 8k
RING_QUICK_GRID = [g for g in RING_GRID if g[0] == 1 and g[2] == 8192]
MULTI_ISSUE = "9 [multi-gpu-run]"


def world_of(cfg):
    """The ranks of a configuration name ("2x4" -> 8; None for one that is not NxL)."""
    m = re.fullmatch(r"(\d+)x(\d+)", cfg)
    return int(m.group(1)) * int(m.group(2)) if m else None


ATTN_ERR = 1e-2  # the issue's bound on O's relative error (attention_bench.py's err: against fp32 since session 44)
RING_LSE_ERR = 1e-3  # the issue's bound on LSE's (max |d| / max(|ref|, 1)): the ring and attention benches' LSE
ETA_LIMIT = 1.0  # MEASURING.md: eta = 1 is the physical limit; above it the floor T_lb is not tight


def knob_default(name, fallback):
    """A knob's default from include/mkernel/knob_list.inc (read only), else fallback."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include", "mkernel", "knob_list.inc")
    try:
        m = re.search(r"MK_(?:TOOL_)?KNOB\(\s*" + name + r'\s*,\s*\w+\s*,\s*"(\d+)"', open(path).read())
    except OSError:
        m = None
    return float(m.group(1)) if m else fallback


def emu_gbps(text):
    """(GB/s, where from): the emulated link's rate a report ran at, as it records it (mkbench's 'emulated NIC:
    N GB/s', the rate the transport took, first; else MK_EMU_GBPS=N in its command or env line), else
    MK_EMU_GBPS's default."""
    m = re.search(r"emulated NIC: (\d+(?:\.\d+)?) GB/s", text) or re.search(r"MK_EMU_GBPS=(\d+(?:\.\d+)?)", text)
    if m:
        return float(m.group(1)), "recorded"
    return knob_default("MK_EMU_GBPS", 50.0), "MK_EMU_GBPS default"


EMU_GBPS = 50.0  # MEASURING.md: emulated nodes' network "through the emu transport at 50 GB/s per GPU"
EMU_TARGET = f"emulated link at {EMU_GBPS:g} GB/s per GPU (MEASURING.md)"


def check_emu_rate(c, issue, where, gbps):
    """A run on emulated nodes ran its link at MEASURING.md's rate: another rate's times are of another network."""
    c.add(issue, EMU_TARGET, where, gbps[0] == EMU_GBPS, f"ran at {gbps[0]:g} GB/s ({gbps[1]})")


def comm_alone(measured, net_mb, gbps, emulated):
    """(T_comm ms, which): the fastest comm alone measured; on emulated nodes the link floor (network MB per
    GPU / GB/s: MB / (GB/s) = ms) when it is smaller."""
    if not emulated:
        return measured, f"comm alone measured {measured:.4f} ms"
    if net_mb is None:
        return measured, f"comm alone measured {measured:.4f} ms (no network bytes: no link floor)"
    floor = net_mb / gbps[0]
    if floor < measured:
        return floor, (f"link floor {floor:.4f} ms = {net_mb:.1f} MB / {gbps[0]:g} GB/s ({gbps[1]}; "
                       f"measured comm alone {measured:.4f} ms)")
    return measured, (f"comm alone measured {measured:.4f} ms (link floor {floor:.4f} ms = {net_mb:.1f} MB / "
                      f"{gbps[0]:g} GB/s, {gbps[1]})")


def judge_eta(c, issue, where, desc, t_compute, t_comm, which, mk, target=None, wanted=0.9):
    """eta = max(compute, comm) / mkernel, unrounded, against the target when given. Returns eta. An eta above
    ETA_LIMIT is not a miss (the fused op beat both halves timed alone: e.g. the ring op's one launch against
    the engine's per-chunk calls) but says its floor is not tight: listed with the row's floor."""
    lb = max(t_compute, t_comm)
    eta = lb / mk
    bound = f"compute alone {t_compute:.4f} ms" if t_compute >= t_comm else which
    why = f"eta {eta:.4f} = T_lb {lb:.4f} ms / mkernel {mk:.4f} ms; T_lb: {bound}"
    c.floors.append((issue, where, desc, why + (" (above 1: this floor is not tight)" if eta > ETA_LIMIT else "")))
    if target:
        c.add(issue, target, where, eta >= wanted, f"{desc}: {why}")
    return eta


class Checks:
    """Target -> where checked, rows seen, rows missed."""

    def __init__(self):
        self.items = {}  # (issue, target, where) -> [seen, [missed descriptions]]
        self.floors = []  # (issue, where, row, how eta was made: T_lb, its bound and floor)
        self.ring_used = set()  # the ring reports that supply a row (check_ring: the newest row of each shape)
        self.notes = []  # lines printed above the tables (check_ring: baseline cells that were not measured)

    def add(self, issue, target, where, ok, what):
        e = self.items.setdefault((issue, target, where), [0, []])
        e[0] += 1
        if not ok:
            e[1].append(what)

    def need(self, issue, target, where):
        self.items.setdefault((issue, target, where), [0, []])


def check_mkbench(path, c, ops=None):
    """ops: the TP tables to check (select(): a Take, the rows this report supplies); None: every one."""
    d = load_json(path)
    if d["meta"].get("shared_gpus"):  # ranks time-sliced one GPU (a correctness run): its times are no measurements
        return
    cfg = mkbench_config(d)
    short = mkbench_short(cfg)
    emulated = "emulated" in cfg or " emu" in cfg
    gbps = emu_gbps(json.dumps(d))
    if d["meta"].get("failed"):  # mkbench wrote the tables it had finished, then failed (bench/mkbench.cpp)
        # Each TP op the run was to measure and has no table of: the run's failure is its newest word (select()
        # keys a failed report under all of them: an older report's table does not stand in for it).
        have = {tp_op(t["title"]) for t in d["tables"]}
        for op in sorted((ops if ops is not None else mkbench_run_ops(d)) - have):
            c.add(issue_of(op), "(benchmark report)",
                  f"{op} {short} (`{os.path.basename(path)}`)", False,
                  f"the run failed: {d['meta']['failed'][:300]} (no {op} table: the run did not finish it)")
    for t in d["tables"]:
        op = tp_op(t["title"])
        if op is None or (ops is not None and op not in ops):
            continue
        issue = issue_of(op)
        if emulated:
            check_emu_rate(c, issue, f"{op} {short} (`{os.path.basename(path)}`)", gbps)
        cols = t["columns"]
        try:
            serial_col = cols.index("serial ms")
            overlap_col = next(i for i, n in enumerate(cols) if "overlap" in n and n.endswith("ms"))
            mk_col, compute_col = cols.index("mkernel ms"), cols.index("cuBLAS alone ms")
            # comm alone: the collective alone (NCCL / mk) and, for RS and AR, mk's variant alone (mkbench's t_comm)
            comm_cols = [i for i, n in enumerate(cols) if " alone" in n and " ms" in n and i != compute_col]
            net_col = next((i for i, n in enumerate(cols) if n.startswith("MB ") and "network" in n), None)
            paired_col = next((i for i, n in enumerate(cols) if n.startswith("mkernel vs best baseline per round")),
                              None)
            ideal_col = cols.index("ideal speedup (T_gemm + T_comm) / max") if op == "GEMM+AR" else None
            if not comm_cols:
                raise ValueError
        except (ValueError, StopIteration):
            c.add(issue, "(benchmark report)", f"{op} {short} (`{os.path.basename(path)}`)", False,
                  "an older table without the columns the targets need")
            continue
        where = f"{op} {short} (`{os.path.basename(path)}`)"
        seen_m = {int(r[0]) for r in t["rows"] if num(str(r[0])) is not None}
        for m in gaps(ops, op, TP_M, seen_m):  # the issue's grid: a row no report has is a miss
            c.add(issue, "(benchmark report)", where, False, f"M={m}: no row (a partial run?)")
        for r in t["rows"]:
            m = int(r[0])
            if not judges(ops, op, m):  # (a newer report's row counts)
                continue
            v = nums(r[serial_col], r[overlap_col], r[mk_col], r[compute_col])
            comm = [x for i in comm_cols for x in all_nums(r[i])]
            if v is None or not comm or not v[2]:
                c.add(issue, "(benchmark report)", where, False, f"M={m}: a cell without a number")
                continue
            serial, best, mk, t_gemm = v[0], min(v[0], v[1]), v[2], v[3]
            ratio = best / mk
            spread = spread_note(r[paired_col] if paired_col is not None else "", ratio >= 1.0)
            c.add(issue, "never slower than the best baseline (serial, 2-stream overlap)", where, ratio >= 1.0,
                  f"M={m}: {ratio:.4f}x (best baseline {best:.3f} ms / mkernel {mk:.3f} ms{spread})")
            net = all_nums(r[net_col]) if net_col is not None else []  # "NVLink / network (measured ...)"
            if len(net) > 2:  # across nodes: the proxy's measured network bytes against the op's formula
                # (the cells print MB to one decimal: equal within that rounding)
                c.add(issue, "network bytes per GPU measured = the op's formula", where,
                      abs(net[2] - net[1]) <= 0.05 + 1e-9,
                      f"M={m}: measured {net[2]:.1f} MB, formula {net[1]:.1f} MB")
            t_comm, which = comm_alone(min(comm), net[1] if len(net) > 1 else None, gbps, emulated)
            judge_eta(c, issue, where, f"M={m}", t_gemm, t_comm, which, mk,
                      "eta >= 0.90 at M >= 4096" if m >= 4096 else None)
            if op == "GEMM+AR":
                target = "speedup over serial >= 0.9 of the ideal (T_gemm+T_comm)/max"
                if num(r[ideal_col]) is None:  # the bench could not make it: no claim on the target
                    c.add(issue, target, where, False, f"M={m}: no ideal ({r[ideal_col]!r})")
                    continue
                # The collective serial itself runs (the first of "AR alone ms (NCCL / mk)": NCCL on one node, mk's
                # own on emulated nodes), measured: the ideal is what overlapping serial's two parts would give
                # over serial; not the fastest collective (eta's) nor the link floor.
                ar_col = next((i for i, n in enumerate(cols) if n.startswith("AR alone ms")), comm_cols[0])
                t_meas = (all_nums(r[ar_col]) or [min(comm)])[0]
                ideal = (t_gemm + t_meas) / max(t_gemm, t_meas)
                got = serial / mk
                c.add(issue, target, where, got >= 0.9 * ideal,
                      f"M={m}: {got:.4f}x of ideal {ideal:.4f}x ({got / ideal:.4f} < 0.9; T_gemm {t_gemm:.3f} ms, "
                      f"T_comm {t_meas:.3f} ms)")


TORCH_TP_TARGETS = {  # op -> (issue, target, met(ratio)) of a torch-tp table
    "AG+GEMM": ("5 [tp-ag-rs]", "faster than PyTorch's fused op at every M", lambda x: x > 1.0),
    "GEMM+RS": ("5 [tp-ag-rs]", "faster than PyTorch's fused op at every M", lambda x: x > 1.0),
    "GEMM+AR": ("6 [tp-ar]", "not slower than PyTorch's symmetric-memory all-reduce after cuBLAS", lambda x: x >= 1.0)}


def check_torch_tp(path, c, take=None):
    """take: the rows to judge (select(): a Take, the rows this report supplies); None: every one."""
    seen = {}  # (op, config) -> the M's with a row
    for op, cfg, m, r in torch_tp_rows(path):
        issue, target, ok = TORCH_TP_TARGETS[op]
        seen.setdefault((op, cfg), set()).update([m] if isinstance(m, int) else [])
        if not judges(take, (op, cfg), m):  # (a newer report's row counts)
            continue
        if op == "GEMM+AR":
            measured = [v for v in (num(r.get("torch symm 1-shot ms")), num(r.get("torch symm 2-shot ms"))) if v]
            torch_ms = min(measured) if measured else None
        else:
            torch_ms = num(r.get("torch fused ms"))
        where = f"{op} {cfg} (`{os.path.basename(path)}`)"
        mk = num(r.get("mkernel ms"))
        if not torch_ms or not mk:  # a failed or missing side is no comparison: a miss until measured
            c.add(issue, target, where, False, f"M={r.get('M')}: not measured (torch {torch_ms}, mkernel {mk})")
            continue
        ratio = torch_ms / mk
        spread = spread_note(r.get("mkernel vs fastest torch per round (p10 / median / p90)", ""), ok(ratio))
        c.add(issue, target, where, ok(ratio), f"M={r['M']}: {ratio:.4f}x (torch {torch_ms:.3f} ms / mkernel "
                                               f"{mk:.3f} ms{spread})")
    for (op, cfg), ms in seen.items():  # the issue's grid: an M no report has is a miss
        issue, target, _ = TORCH_TP_TARGETS[op]
        for m in gaps(take, (op, cfg), TP_M, ms):
            c.add(issue, target, f"{op} {cfg} (`{os.path.basename(path)}`)", False, f"M={m}: no row (a partial run?)")


# bench/torch_ring_attn_bench.py's BASELINES; on emulated nodes only those whose K/V cross the emulated network
# can be the best one (its baseline_candidates): NCCL's ring and all-gather cross NVLink there.
RING_BASELINES = ("ring flash", "ring cudnn", "allgather flash", "allgather cudnn", "allgather-mk cudnn",
                  "allgather-mk-overlap cudnn")
RING_COMPUTE = ("compute flash", "compute cudnn", "compute mkernel")  # bench/ring_eta.py's halves timed alone


def ring_needs(r):
    """(baselines, halves): the columns ("NAME ms") a ring row's config needs: its best baseline's candidates
    (torch_ring_attn_bench.baseline_candidates: every baseline on one node, the allgather-mk ones on emulated
    nodes) and the halves timed alone (ring_eta: every compute one; comm: ring_eta.comm_candidates, mkernel's
    alone on emulated nodes). One the report lacks leaves a verdict on the others: a miss (a --only run?)."""
    emulated = " emu" in r["config"]
    base = tuple(n for n in RING_BASELINES if not emulated or n.startswith("allgather-mk"))
    return base, RING_COMPUTE + (("comm mkernel",) if emulated else ("comm nccl", "comm mkernel"))


def lacking(r, names):
    """The reason a row lacks columns of names ('' where it has them all)."""
    gone = [n for n in names if f"{n} ms" not in r]
    return f"no {', '.join(gone)} column{'s' if len(gone) > 1 else ''}: a --only run?" if gone else ""


def ring_best(r):
    """(best baseline ms or None, [the candidates whose cell has no time: "NAME 'failed'"]) of a ring row,
    recomputed from its columns (not the report's "best baseline" cell: a report from before the emulated-node
    rule named an NVLink baseline there); a cell that failed (or '-') is no candidate, and is said."""
    cells = {n: r[f"{n} ms"] for n in ring_needs(r)[0] if f"{n} ms" in r}
    times = [num(v) for v in cells.values() if num(v)]
    return (min(times) if times else None), [f"{n} {v!r}" for n, v in cells.items() if not num(v)]


def ring_bound(r, gbps):
    """(compute alone ms, comm alone ms, which comm) of a ring row, or None where a half has no time: the fastest
    of the halves timed alone (ring_needs; comm: the link floor when smaller on emulated nodes, comm_alone)."""
    halves = [n for n in ring_needs(r)[1] if num(r.get(f"{n} ms"))]
    comp = [num(r[f"{n} ms"]) for n in halves if n in RING_COMPUTE]
    comm = [num(r[f"{n} ms"]) for n in halves if n not in RING_COMPUTE]
    if not comp or not comm:
        return None
    net = all_nums(r.get("network MB per GPU per mkernel call (formula / measured)"))
    t_comm, which = comm_alone(min(comm), net[0] if net else None, gbps, " emu" in r["config"])
    return min(comp), t_comm, which


def ring_wrong(r, mk):
    """Why a ring row's mkernel output is wrong ('' where it is not): the ring bench's check of it against fp32 at
    this shape ("mkernel vs fp32 ..." column, O / LSE) above the issue's bounds (< 1e-2, < 1e-3), not checked, or
    no such column (not checked: a report before session 44's bench, whose output no verdict may take as right)."""
    chk = next((v for k, v in r.items() if k.startswith("mkernel vs fp32")), None)
    if chk is None:
        return "wrong output (no 'mkernel vs fp32' column: mkernel's output was not checked)"
    errs = all_nums(chk)
    if mk and not (len(errs) >= 2 and errs[0] < ATTN_ERR and errs[1] < RING_LSE_ERR):
        return f"wrong output (mkernel vs fp32, O / LSE: {chk!r}; bounds {ATTN_ERR:g} / {RING_LSE_ERR:g})"
    return ""


def spread_note(cell, met):
    """What a verdict's detail adds from a report's round-by-round cell ("p10 / median / p90" of the best baseline's
    time over mkernel's; '' without one). The verdict stays the ratio of medians (the issue's); a miss whose p90
    is above 1 (in at least a tenth of the rounds mkernel was faster) is within the run's spread. A p90 printed as 1
    is not taken as above 1 (it may be a rounded 0.9996: the cells have 4 decimals since session 46, 3 before)."""
    paired = all_nums(cell)
    if len(paired) != 3:
        return ""
    note = f"; per round p10/median/p90 {paired[0]:.4f}/{paired[1]:.4f}/{paired[2]:.4f}"
    return note + (", within the run's spread" if not met and paired[2] > 1.0 else "")


def paired_spread(r, met, best_ms):
    """spread_note of a ring row, '' where the report's best baseline is not the judge's (an older report naming
    an NVLink baseline on emulated nodes)."""
    named = re.findall(r"\((\d+(?:\.\d+)?) ms\)", r.get("best baseline", ""))  # "allgather cudnn (13.237 ms)"
    if not named or abs(float(named[-1]) - best_ms) > 5e-4:
        return ""
    return spread_note(r.get("mkernel vs best baseline per round (p10 / median / p90)", ""), met)


def check_ring(paths, c):
    """Every ring report given (select(): all of them), merged per shape: the newest report's row of each
    (config, B, Hkv, S_local, causal) counts, so a run split in parts (tools/issue_bench.sh ring1x2, ring1x2b)
    or cut short and completed later covers the grid; config: the layout, the regime (--lead-cycles 0: "no-lead")
    and, for a GPU other than MEASURING.md's (--gpu any), the GPU: never one grid of two."""
    issue = "7 [ring-attn]"
    newest = {}
    for path in sorted(paths, key=stamp_key):
        gbps = emu_gbps(open(path).read())
        for key, r in ring_rows(path):
            if key[0].split()[0] != "1x1":  # one rank (a smoke run): not a configuration of the targets
                newest[(key[0] + on_machine(gpu_of(path)),) + key[1:]] = (r, path, gbps)
    c.ring_used.update(p for _, p, _ in newest.values())
    for cfg in sorted({k[0] for k in newest}):
        # The rows merged from several reports: of one commit, or the grid mixes the numbers of different code.
        used = {p for k, (_, p, _) in newest.items() if k[0] == cfg}
        if len(used) > 1:
            check_one_commit(c, issue, f"ring attention {cfg}",
                             {p: sum(1 for k, v in newest.items() if k[0] == cfg and v[1] == p) for p in used})
        grid = RING_QUICK_GRID if (world_of(cfg.split()[0]) or 0) > 2 else RING_GRID  # (more GPUs: issue 9's)
        missing = [g for g in grid if (cfg,) + g not in newest]
        for b, h, s, causal in missing:
            c.add(issue, "(benchmark report)", f"ring attention {cfg}", False,
                  f"B={b} Hkv={h} S_local={s} causal={causal}: no row (a partial run?)")
    unmeasured, rated = {}, set()  # where -> the baseline cells without a time; where: its link's rate checked
    for key, (r, path, gbps) in sorted(newest.items()):
        cfg = key[0]
        where = f"ring attention {cfg} (`{os.path.basename(path)}`)"
        if " emu" in r["config"] and where not in rated:
            rated.add(where)
            check_emu_rate(c, issue, where, gbps)
        desc = f"B={r['B']} Hkv={r['Hkv']} S_local={r['S_local']} causal={r['causal']}"
        (best, failed), mk = ring_best(r), num(r["mkernel ms"])
        unmeasured.setdefault(where, []).extend(f"{x} at {desc}" for x in failed)
        # mkernel's output at this shape against fp32: above the issue's bounds, or not checked, the speed is a
        # wrong output's; a column the config needs that the report lacks leaves no verdict on the row.
        wrong = ring_wrong(r, mk)
        why = [x for x in (wrong, lacking(r, ring_needs(r)[0])) if x]
        if not why and (best is None or not mk):  # a failed side: a miss until measured
            why.append(f"not measured (best baseline {r['best baseline']!r}, mkernel {r['mkernel ms']!r})")
        if why:
            if " emu" in r["config"] and lacking(r, ring_needs(r)[0]):  # (the best it named crossed NVLink)
                why[-1] += (" (on emulated nodes only the allgather-mk baselines can be the best one: their K/V cross "
                            f"the emulated network; the report named {r['best baseline']!r})")
            c.add(issue, "never slower than the best baseline", where, False, f"{desc}: " + "; ".join(why))
        else:
            c.add(issue, "never slower than the best baseline", where, best / mk >= 1.0,
                  f"{desc}: {best / mk:.4f}x (best baseline {best:.3f} ms / mkernel {mk:.3f} ms"
                  f"{paired_spread(r, best / mk >= 1.0, best)}" + (
                      f"; without a time, not candidates: {', '.join(failed)}" if failed else "") + ")")
        net = all_nums(r.get("network MB per GPU per mkernel call (formula / measured)"))
        if " emu" in r["config"] and len(net) >= 2:  # across nodes: the proxy's count against the formula
            # "formula / lo-hi" over ranks (one value where they agree): every rank's count must match, the
            # highest too (the dash reads as a minus sign: abs)
            got = [abs(x) for x in net[1:]]
            c.add(issue, "network bytes per GPU measured = the op's formula", where,
                  all(abs(x - net[0]) <= 0.05 + 1e-9 for x in got),
                  f"{desc}: measured {'-'.join(f'{x:.1f}' for x in got)} MB, formula {net[0]:.1f} MB")
        target = "eta >= 0.9 at S_local >= 8k" if int(r["S_local"]) >= 8192 else None
        bound = ring_bound(r, gbps)
        why = [x for x in (wrong, lacking(r, ring_needs(r)[1])) if x]  # (a wrong output's eta is no overlap's)
        if not why and (bound is None or not mk):
            why.append("eta not measured")
        if why:
            if target:
                c.add(issue, target, where, False, f"{desc}: " + "; ".join(why))
        else:
            judge_eta(c, issue, where, desc, *bound, mk, target)
    c.notes += [f"note: {w}: baseline cells without a time, not candidates for the best baseline: " + "; ".join(x)
                for w, x in unmeasured.items() if x]


def check_one_commit(c, issue, where, rows):
    """rows: report -> how many rows it gave one grid merged from several reports (check_ring, check_merged): the
    reports must be of one commit, or the grid mixes the numbers of different code (a miss)."""
    groups = git_commits.groups(sorted(rows, key=stamp_key), commit_of)
    c.add(issue, "the rows merged from several reports are of one commit", where, len(groups) == 1,
          f"rows of {len(groups)} commits: " + "; ".join(f"{g or 'no commit recorded'}: " + ", ".join(
              f"`{os.path.basename(p)}` ({rows[p]} rows)" for p in ps) for g, ps in groups))


def check_attention(path, c, take=None):
    """take: the rows to judge (select(): a Take, the rows this report supplies); None: every one."""
    target = "one-GPU engine at least as fast as SDPA's flash backend"
    where = f"attention, one GPU (`{os.path.basename(path)}`)"
    seen = set()
    for key, r in attention_rows(path):
        seen.add(key)
        if not judges(take, "attention", key):  # (a newer report's row counts)
            continue
        v = nums(r["torch flash ms"], r["mkernel ms"])
        desc = f"B={r['B']} S={r['S']} Hkv={r['Hkv']} causal={r['causal']}"
        err = num(r.get("err"))
        if err is None or not err < ATTN_ERR:  # NaN, absent or too large: the speed of a wrong output
            c.add("7 [ring-attn]", target, where, False,
                  f"{desc}: wrong output (err {r.get('err', 'absent')!r}, bound {ATTN_ERR:g})")
            continue
        # The LSE against fp32 (since session 44): NaN, too large, or not checked (no column: a report before it)
        lerr = num(r.get("lse err"))
        if lerr is None or not lerr < RING_LSE_ERR:
            c.add("7 [ring-attn]", target, where, False, f"{desc}: wrong LSE (" + (
                f"lse err {r['lse err']!r}" if "lse err" in r else "no 'lse err' column: the LSE was not checked")
                + f", bound {RING_LSE_ERR:g})")
            continue
        if v is None or not v[1]:  # a failed side: a miss until measured
            c.add("7 [ring-attn]", target, where, False, f"{desc}: not measured")
            continue
        ratio = v[0] / v[1]
        c.add("7 [ring-attn]", target, where, ratio >= 1.0,
              f"{desc}: {ratio:.4f}x (flash {v[0]:.3f} ms / mkernel {v[1]:.3f} ms)")
    # the engine grid attention_bench.py runs: a row no report has is a miss
    for b, s, h, causal in gaps(take, "attention", ATTN_GRID, seen):
        c.add("7 [ring-attn]", target, where, False, f"B={b} S={s} Hkv={h} causal={causal}: no row (a partial run?)")


CHECKS = {"mkbench-": check_mkbench, "torch-tp-": check_torch_tp,  # check(path, c, take=None)
          "torch-ring-attn-": lambda path, c, _=None: check_ring([path], c), "attention-": check_attention}
KINDS = [(p, e, CHECKS[p]) for p, e in KIND_NAMES]


def kind_of(path):
    """(name prefix, ending, check(path, c, take=None)) of a report judged; None for any other file."""
    k = kind_name(path)
    return next((x for x in KINDS if x[0] == k), None)


def check_merged(files, c):
    """The rows of an op and configuration (attention: of the grid) select() merged from several reports: of one
    commit (check_one_commit, as ring rows); the line names each report and how many rows it gave."""
    merged = {}  # (kind, config, GPU, part) -> {report: rows}
    for f, take in files:
        for part, _ in take.rows if isinstance(take, Take) else ():
            n = merged.setdefault((kind_of(f)[0], config_key(f), gpu_of(f) or "", part), {})
            n[f] = n.get(f, 0) + 1
    for (kind, cfg, gpu, part), rows in sorted((k, v) for k, v in merged.items() if len(v) > 1):
        op = part_op(part)
        name = (f"{op} {mkbench_short(cfg)}" if kind == "mkbench-" else f"{op} {part[1]} against PyTorch"
                if kind == "torch-tp-" else "attention, one GPU") + on_machine(gpu or None)
        issue = issue_of(op)
        check_one_commit(c, issue, f"{name} (rows merged: " + ", ".join(
            f"`{os.path.basename(p)}` ({rows[p]} rows)" for p in sorted(rows, key=stamp_key, reverse=True)) + ")", rows)


def report(c, out=None):
    out = out or sys.stdout
    missed_any = False
    for issue in sorted({k[0] for k in c.items}):
        out.write(f"\n## Issue {issue}\n\n| target | where | rows | missed |\n|---|---|---|---|\n")
        for (iss, target, where), (seen, missed) in c.items.items():
            if iss != issue:
                continue
            verdict = "NO REPORT" if seen == 0 else f"{len(missed)}: " + "; ".join(missed) if missed else "none (met)"
            missed_any = missed_any or seen == 0 or bool(missed)
            out.write(f"| {target} | {where} | {seen} | {verdict} |\n")
    if c.floors:  # which floor each row's eta used (emulated nodes: the measured comm alone or the link floor)
        out.write("\n## eta of every row: T_lb and what bounds it\n\n"
                  "| issue | where | row | eta |\n|---|---|---|---|\n")
        for issue, where, desc, why in c.floors:
            out.write(f"| {issue} | {where} | {desc} | {why} |\n")
    return missed_any


MIN_ROUNDS = 20  # MEASURING.md: the median of at least 20 timed calls


def judged(files, c):
    """(report, [issues it feeds]) of every report judged (a ring report only where it supplies a row)."""
    for f, ops in files:
        kind = kind_of(f)[0]
        if kind == "torch-ring-attn-" and f not in c.ring_used:  # every row superseded by a newer report's
            continue
        if kind in ("torch-ring-attn-", "attention-"):
            issues = ["7 [ring-attn]"]
        else:
            opset = ops if ops is not None else (set(report_rows(f)) if kind == "mkbench-" else {"AG+GEMM", "GEMM+AR"})
            issues = sorted({issue_of(op) for op in opset})
        yield f, issues


def check_protocol(files, c):
    """Every report read: at least MIN_ROUNDS timed rounds (a report that does not say is a miss too), under
    each issue it feeds."""
    for f, issues in judged(files, c):
        rounds, _ = provenance(f)
        for issue in issues:
            c.add(issue, f"at least {MIN_ROUNDS} timed rounds (MEASURING.md)", f"`{os.path.basename(f)}`",
                  rounds is not None and rounds >= MIN_ROUNDS,
                  f"{rounds} rounds" if rounds is not None else "the report does not say how many rounds")


def commit_of(path):
    """(hex, with uncommitted changes) of the commit a report says it measured; None where it does not say."""
    return git_commits.parse(provenance(path)[1])


def check_commits(files, c, head, whence="git HEAD"):
    """The commit rule (git_commits.judge) on every report judged; returns the warnings to print above the tables."""
    return git_commits.judge(list(judged(files, c)), commit_of, c.add, head, whence, stamp_key)


def need_absent(c):
    """What the issues need, reported as absent when no report supplied it: issues 5-7's two-GPU reports (1x2 and
    2x1, in the default regime), whatever else was given; on G = 4 or 8 (issue 9: 2 x G/2 and 1 x G, every op and
    the ring) wherever a report of that many ranks was."""
    cfgs = {m.group(0) for k in c.items if k[2].startswith(("AG+GEMM ", "GEMM+", "ring "))
            for m in [re.search(r"\b\d+x\d+\b", k[2].split(" (")[0])] if m}  # (a regime's suffix after it)
    multi = sorted(w for w in {world_of(x) for x in cfgs} if w in (4, 8))
    ring = "ring attention"
    for op, issue in ((op, issue_of(op)) for op in TP_OPS):
        for cfg in ("1x2", "2x1"):
            if not any(k[0] == issue and k[2].startswith(f"{op} {cfg} (") for k in c.items):
                c.need(issue, "(benchmark report)", f"{op} {cfg}: no mkbench report")
    for cfg in ("1x2", "2x1"):
        if not any(k[0] == "7 [ring-attn]" and (k[2] == f"{ring} {cfg}" or k[2].startswith(f"{ring} {cfg} ("))
                   for k in c.items):
            c.need("7 [ring-attn]", "(benchmark report)", f"{ring} {cfg}: no torch-ring-attn report")
    for op, issue in ((op, issue_of(op)) for op in TP_OPS):
        if not any(k[0] == issue and k[2].startswith(f"{op} 1x2 (") and "PyTorch" in k[1] for k in c.items):
            c.need(issue, "(benchmark report)", f"{op} 1x2 against PyTorch: no torch-tp report")
    for g in multi:
        for cfg in (f"2x{g // 2}", f"1x{g}"):
            for what in [*TP_OPS, ring]:
                if not any(k[2] == f"{what} {cfg}" or k[2].startswith(f"{what} {cfg} (") for k in c.items):
                    c.need(MULTI_ISSUE, "(benchmark report)", f"{what} {cfg}: no report (tools/issue_bench.sh "
                           f"multi-{'ring' if what == ring else 'tp'} OUT {g // 2 if cfg[0] == '2' else g})")
    if not any(k[2].startswith("attention, one GPU") for k in c.items):
        c.need("7 [ring-attn]", "(benchmark report)", "one-GPU engine against SDPA: no attention report")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--all", action="store_true", help="every report found, each whole (not merged per row)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed or unreported")
    ap.add_argument("--commit", help="the commit the reports must have measured (default: this tree's git HEAD; "
                    "'any': not judged, a mix of commits is still said)")
    ap.add_argument("--gpu", default=MACHINE_GPU, help=f"the GPU a report must name to count (default "
                    f"{MACHINE_GPU}: MEASURING.md counts the lent {MACHINE_GPU} machine only; the others are noted; "
                    "'any': every report counts, each GPU's rows judged apart)")
    a = ap.parse_args(argv)
    files = select(a.paths, not a.all, a.gpu)
    c = Checks()
    ring = [f for f, _ in files if kind_of(f)[0] == "torch-ring-attn-"]
    for f, take in files:
        if kind_of(f)[0] != "torch-ring-attn-":
            kind_of(f)[2](f, c, take)
    check_ring(ring, c)
    check_merged(files, c)
    check_protocol(files, c)
    if a.commit in (None, "any"):
        head, whence = (a.commit or git_commits.resolve()), "git HEAD"
    else:
        head, whence = git_commits.resolve(a.commit), f"--commit {a.commit}"
        if head is None:
            ap.error(f"--commit {a.commit}: git knows no such commit here")
    warnings = check_commits(files, c, head, whence)
    need_absent(c)
    # Each report's commit and rounds beside it: one from another commit than the tree under test, or with
    # modified files, is a number of that code, not of this one.
    print("Reports read (commit; timed rounds):\n" + "".join(
        f"- `{f}`" + read_note(o) + " - {1}, {0} rounds\n".format(
            *(x if x is not None else "not recorded" for x in provenance(f))) for f, o in files))
    notes = off_gpu(a.paths, a.gpu) + c.notes
    if warnings or notes:
        print("\n".join(warnings + notes) + "\n")
    missed = report(c)
    return 1 if (missed and a.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
