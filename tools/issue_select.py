"""Which benchmark reports tools/issue_targets.py judges, and which rows of each (select): the reports found in the
paths given, of the machine MEASURING.md counts (the H200; gpu_counts), merged per kind, configuration and GPU so
that each row of the issues' grids comes from the newest report holding it (a Take says which rows a report
supplies; judges and gaps read it), and the note beside each report read (read_note). No targets: issue_targets.py
judges the rows chosen here."""
import os
import re

from issue_reports import (  # (tools/issue_reports.py: reading the reports)
    STAMP, TP_TITLES, attention_rows, config_key, gpu_of, load_json, mkbench_run_ops, num, stamp_key, torch_tp_rows,
    tp_op)

TP_M = (1024, 2048, 4096, 8192, 16384)  # issues 5 and 6: M per TP group
# issue 7's one-GPU engine grid (bench/attention_bench.py: batch 4 up to S = 8k), D = 128: B, S, Hkv, causal
ATTN_GRID = [(b, s, h, c) for b in (1, 4) for s in (2048, 4096, 8192, 16384, 32768) if b * s <= 32768
             for h in (32, 8) for c in ("0", "1")]
# The kinds of reports judged: (name prefix, ending); issue_targets.KINDS adds each one's check.
KIND_NAMES = (("mkbench-", ".json"), ("torch-tp-", ".md"), ("torch-ring-attn-", ".md"), ("attention-", ".md"))
# MEASURING.md: "A number counts only if it was measured here, on the lent H200 machine".
MACHINE_GPU = "H200"


def kind_name(path):
    """The kind (its name prefix) of a report judged; None for any other file."""
    b = os.path.basename(path)
    return next((p for p, e in KIND_NAMES if b.startswith(p) and b.endswith(e) and STAMP.search(b)), None)


def gpu_counts(gpu, want=MACHINE_GPU):
    """Whether a report measured on `gpu` (None: it does not say) counts: its name holds `want` as a word
    ("NVIDIA H200" for H200); want "any": every report, also one that does not say."""
    if want == "any":
        return True
    return gpu is not None and re.search(r"(?<![A-Za-z0-9])" + re.escape(want) + r"(?![A-Za-z0-9])", gpu,
                                         re.I) is not None


def on_machine(gpu):
    """'' for the machine MEASURING.md counts, else ' (GPU)': what a grid's name adds where --gpu any judges the
    reports of other GPUs beside it (never in one grid)."""
    return "" if gpu_counts(gpu) else f" ({gpu or 'GPU not recorded'})"


def found(paths):
    """Every report of a kind judged in paths (files, or folders of them), less those of no configuration of the
    targets: one rank (config 1x1: mkbench's diagnosis tables, torch-tp smoke runs) and ranks that shared a GPU
    (config "... shared-GPU": a correctness run, it measured nothing)."""
    files = [x for p in paths for x in ([os.path.join(p, f) for f in sorted(os.listdir(p))] if os.path.isdir(p)
                                        else [p])]
    return [f for f in files if kind_name(f) and not (kind_name(f) in ("mkbench-", "torch-tp-") and (
        config_key(f).startswith("1x1") or "shared-GPU" in config_key(f)))]


def off_gpu(paths, want=MACHINE_GPU):
    """The notes on the reports found that do not count for their GPU (gpu_counts), one per report."""
    out = []
    for f in found(paths):
        gpu = gpu_of(f)
        if not gpu_counts(gpu, want):
            said = f"was measured on {gpu}" if gpu else "does not record its GPU"
            out.append(f"note: `{f}` {said}: not counted (MEASURING.md counts the {MACHINE_GPU} machine only; "
                       "--gpu any counts it)")
    return out


def report_rows(path):
    """{part: {row}} of a report, as select() merges them: mkbench {TP op: {M}}, and for a run that failed (meta
    "failed") every other TP op it was asked to measure: None (its failure, which no older report's rows stand in
    for); torch-tp {(op, config): {M}}; attention {"attention": {(B, S, Hkv, causal)}}."""
    kind, out = kind_name(path), {}
    try:
        if kind == "mkbench-":
            d = load_json(path)
            for t in (t for t in d["tables"] if tp_op(t["title"])):
                out.setdefault(tp_op(t["title"]), set()).update(
                    int(r[0]) for r in t["rows"] if num(str(r[0])) is not None)
            out.update({op: None for op in mkbench_run_ops(d) - set(out)} if d["meta"].get("failed") else {})
        for op, cfg, m, _ in torch_tp_rows(path) if kind == "torch-tp-" else ():
            out.setdefault((op, cfg), set()).add(m)
        for key, _ in attention_rows(path) if kind == "attention-" else ():
            out.setdefault("attention", set()).add(key)
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as e:  # loud: else older rows stood in for it
        raise SystemExit(f"issue_targets: cannot read the report {path}: {type(e).__name__}: {e}") from e
    return out


def part_op(part):  # the TP op of a part of report_rows (None: attention)
    return part[0] if isinstance(part, tuple) else (part if part in TP_TITLES.values() else None)


def row_name(part, r):  # a row of report_rows as the checks name it
    return "B={} S={} Hkv={} causal={}".format(*r) if part == "attention" else (
        f"{' '.join(part) if isinstance(part, tuple) else part} M={r}")


class Take(frozenset):
    """select()'s answer for a report merged with others of its kind and configuration: the TP ops it supplies
    rows of (check_mkbench's ops); rows: the (part, row)s it supplies; lead: the parts it is the newest report of
    (it misses their grid's rows that no report has); cover: part -> the rows that the reports merged supply."""

    def __new__(cls, ops, rows, lead, cover):
        t = super().__new__(cls, ops)
        t.rows, t.lead, t.cover = rows, lead, cover
        return t


def judges(take, part, row):
    """Whether a check judges a row: every row; of a report select() merged (a Take), those it supplies."""
    return not isinstance(take, Take) or (part, row) in take.rows


def gaps(take, part, grid, seen):
    """The rows of the issue's grid a report misses (seen: those it has); for a report select() merged, those no
    report merged has, under the newest holding the part."""
    if not isinstance(take, Take):
        return [g for g in grid if g not in seen]
    return [g for g in grid if g not in take.cover[part]] if part in take.lead else []


def select(paths, newest_only, gpu=MACHINE_GPU):
    """[(file, take)]: every report found (take None: all its rows), or those whose rows count: of each kind,
    configuration and GPU, each row (report_rows: an op's M; attention: a shape) from the newest report holding
    it, so that neither a newer partial run nor a later run of other benchmarks hides an older report's other rows
    of the issue's grid (take: a Take); an op's rows stop at a failed mkbench run that was asked for it and has no
    table of it. Ring reports: all (check_ring merges them per shape and GPU). Only reports measured on the GPU
    `gpu` names count (gpu_counts; off_gpu notes the others)."""
    files = [f for f in found(paths) if gpu_counts(gpu_of(f), gpu)]
    if not newest_only:
        return [(f, None) for f in files]
    picked, groups = {}, {}
    for f in files:
        if kind_name(f) == "torch-ring-attn-":  # every one: check_ring keeps the newest row of each shape
            picked[f] = None
        else:  # (never rows of two GPUs in one grid)
            groups.setdefault((kind_name(f), config_key(f), gpu_of(f)), []).append(f)
    for group in groups.values():
        cover, stopped, took = {}, set(), {}
        for f in sorted(group, key=stamp_key, reverse=True):  # newest first (equal stamps: the first found)
            ops, rows, lead = set(), set(), set()
            for part, have in report_rows(f).items():
                if part in stopped:
                    continue
                if part not in cover:
                    lead.add(part)
                got, grid = cover.setdefault(part, set()), ATTN_GRID if part == "attention" else TP_M
                new = {(part, r) for r in have or () if r not in got and (part in lead or r in grid)}
                if new or part in lead or have is None and any(g not in got for g in grid):
                    ops.add(part_op(part))  # (a failed run: where its failure is why grid rows are missing)
                got.update(r for _, r in new)
                rows |= new
                if have is None:
                    stopped.add(part)
            if ops:
                took[f] = (ops - {None}, rows, lead)
        picked.update({f: Take(ops, rows, lead, cover) for f, (ops, rows, lead) in took.items()})
    return sorted(picked.items())


def read_note(take):
    """Beside a report read: the TP ops it supplies, and the rows it fills in for newer reports that lack them."""
    fill = [(p, r) for p, r in take.rows if p not in take.lead] if isinstance(take, Take) else []
    fill.sort(key=lambda x: (str(x[0]), (1, str(x[1])) if isinstance(x[1], str) else (0, x[1])))
    note = "; ".join(x for x in (", ".join(sorted(take or ())), fill and "rows newer reports lack: " + ", ".join(
        row_name(*x) for x in fill)) if x)
    return f" ({note})" if note else ""
