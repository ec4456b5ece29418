"""Reading tools/issue_targets.py's benchmark reports: a report's name stamp and its UTC time, its JSON (read
once), the numbers of its cells and its markdown tables, the TP op of an mkbench table's title, the rows of a ring
(torch-ring-attn), a torch-tp and a one-GPU attention report, an mkbench report's configuration and the TP ops its run
was asked for, the configuration a newer report of the same kind replaces (config_key), the GPU a report was measured
on (gpu_of), and the timed rounds and commit a report records (provenance). No targets: issue_targets.py judges what
these read."""
import datetime
import functools
import json
import os
import re

STAMP = re.compile(r"(\d{8}T\d{4,6}Z)")


@functools.lru_cache(maxsize=None)
def load_json(path):
    """A report's JSON, read once (selection and checks both look at it)."""
    with open(path) as f:
        return json.load(f)


def stamp_of(path):
    m = STAMP.search(os.path.basename(path))
    return m.group(1) if m else ""


def stamp_key(path):
    """The UTC time of a report's stamp, for ordering: a name's stamp has seconds or not (20261201T1015Z is
    10:15:00, older than 20261201T101542Z, which the strings order the other way); none or a bad one: oldest."""
    s = stamp_of(path)
    for fmt in ("%Y%m%dT%H%M%SZ", "%Y%m%dT%H%MZ"):
        try:
            return datetime.datetime.strptime(s, fmt)
        except ValueError:
            pass
    return datetime.datetime.min


def num(cell):
    """The number a measured cell starts with ('0.343', '1.29x', '0.061 / 0.069' -> 0.061); None for a cell
    that is not a measurement ('-', 'unavailable: ... torch 2.15 ...', 'failed (...)', 'nan'); '2.9e-03' -> 0.0029."""
    m = re.match(r"\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)", cell or "")
    return float(m.group(1)) if m else None


def md_tables(text):
    """Markdown tables of a report: (section heading, [dict per row]) in order."""
    out, heading, header, rows = [], "", None, []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not all(set(c) <= set("-: ") for c in cells):
                rows.append(dict(zip(header, cells)))
            continue
        if header is not None:  # the table ends before a heading right after it counts
            out.append((heading, rows))
            header, rows = None, []
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
    return out


def all_nums(cell):
    """Every number of a cell ('0.251 / 0.249' -> [0.251, 0.249]); [] for a failed or absent one."""
    if num(cell) is None:
        return []
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", cell)]


def nums(*cells):
    """The first number of each cell, or None when any cell has none (a row that cannot be checked)."""
    vals = [num(c) for c in cells]
    return None if any(v is None for v in vals) else vals


TP_TITLES = {"AllGather + GEMM": "AG+GEMM", "GEMM + ReduceScatter": "GEMM+RS", "GEMM + AllReduce": "GEMM+AR"}


def tp_op(title):
    return next((op for t, op in TP_TITLES.items() if title.startswith(t)), None)


def ring_regime(text):
    """A ring report's power regime, as its config's suffix: '' for the bench's default (a GPU sleep before each
    timed call, --lead-cycles > 0), " no-lead" for --lead-cycles 0 (its timing line's "GPU sleep of 0 cycles", else
    its command's flag): another regime, judged beside the default's rows, never instead of them (as mkbench's
    "rested" and torch_tp_bench's "back-to-back")."""
    m = re.search(r"GPU sleep of (\d+) cycles", text) or re.search(r"--lead-cycles[ =](\d+)", text)
    return " no-lead" if m and int(m.group(1)) == 0 else ""


def ring_rows(path):
    """((config, B, Hkv, S_local, causal), row) of a ring report; config: the layout ("1x2", "2x1") and the
    regime (ring_regime)."""
    text = open(path).read()
    regime = ring_regime(text)
    for _, rows in md_tables(text):
        for r in rows:
            if "mkernel ms" in r and "best baseline" in r:
                yield (r["config"].split()[0] + regime, int(r["B"]), int(r["Hkv"]), int(r["S_local"]),
                       r["causal"]), r


TORCH_TP_OPS = ("AG+GEMM", "GEMM+RS", "GEMM+AR")  # torch_tp_bench.py's tables (a heading per op)


def torch_tp_rows(path):
    """(op, config, M, row) of a torch-tp report's rows: config " back-to-back" for a --back-to-back run; M an int,
    or its cell where that is no number."""
    text = open(path).read()
    b2b = torch_tp_back_to_back(text)
    for heading, rows in md_tables(text):
        op = heading.split()[0] if heading else ""
        for r in rows if op in TORCH_TP_OPS else ():
            cfg, m = r.get("config", "?"), num(r.get("M"))
            cfg += " back-to-back" if b2b and "back-to-back" not in cfg else ""
            yield op, cfg, (int(m) if m is not None else r.get("M")), r


def attention_rows(path):
    """((B, S, Hkv, causal), row) of an attention report's rows at the issue's D = 128, H = 32."""
    for _, rows in md_tables(open(path).read()):
        for r in rows:
            if "mkernel ms" in r and "torch flash ms" in r and r.get("D") == "128" and r.get("H") == "32":
                causal = "1" if r.get("causal", "").lower() in ("1", "yes", "true") else "0"
                yield (int(r["B"]), int(r["S"]), int(r["Hkv"]), causal), r


def mkbench_config(d):
    """An mkbench report's config, " rested" added for a --lead-cycles run written before mkbench said so in its
    config (its timing meta names the flag)."""
    cfg = d["meta"].get("config", "?")
    if "(--lead-cycles)" in d["meta"].get("timing", "") and " rested" not in cfg:
        cfg += " rested"
    return cfg


def torch_tp_back_to_back(text):
    """A torch-tp report timed with --back-to-back (its timing line says so, also before its rows did)."""
    return any(line.startswith("- timing:") and "--back-to-back" in line for line in text.splitlines())


def config_key(path):
    """What a newer report of the same kind replaces: mkbench by its config, the ring bench by its layout and
    regime (ring_regime), torch-tp by its config and regime."""
    b = os.path.basename(path)
    if b.startswith("mkbench-"):
        try:
            return mkbench_config(load_json(path))
        except (OSError, ValueError, KeyError):
            return ""
    if b.startswith("torch-ring-attn-") or b.startswith("torch-tp-"):  # (torch-tp: "1x2" or "1x2 back-to-back")
        text = open(path).read()
        b2b = b.startswith("torch-tp-") and torch_tp_back_to_back(text)
        for _, rows in md_tables(text):
            for r in rows:
                if "config" in r and b.startswith("torch-ring-attn-"):
                    return r["config"].split()[0] + ring_regime(text)
                if "config" in r:
                    return r["config"].split()[0] + (" back-to-back" if b2b or "back-to-back" in r["config"] else "")
    return ""


def gpu_of(path):
    """The GPU a report says it was measured on (None where it does not say): mkbench's meta "gpu"; the torchrun
    benches' "- GPU: NAME x W (one node)" line; attention_bench.py's header, the part before "; torch X" ("...;
    NVIDIA H200; torch 2.11", since session 44 "...; NVIDIA H200, driver 580.159.04; torch 2.11")."""
    if path.endswith(".json"):
        try:
            return load_json(path).get("meta", {}).get("gpu") or None
        except (OSError, ValueError):
            return None
    text = open(path).read()
    m = (re.search(r"^- GPU: (.+?) x \d+ \(", text, re.M)
         or re.search(r"; ([^;\n]+?)(?:, driver [^;\n]*)?; torch \d", text.split("\n|", 1)[0]))
    return m.group(1).strip() if m else None


TP_BENCHES = {"ag_gemm": "AG+GEMM", "gemm_rs": "GEMM+RS", "gemm_ar": "GEMM+AR"}  # mkbench's names of the TP ops
MKBENCH_VALUE_OPTS = ("--out", "--iters", "--warmup", "--lead-cycles")  # its options that take a value


def mkbench_run_ops(d):
    """The TP ops an mkbench run was asked to measure: the TP benchmarks its command names; every one where it
    names no benchmark (mkbench then runs them all) or the report records no command."""
    cmd = d["meta"].get("command")
    if not cmd:
        return set(TP_BENCHES.values())
    args, names, i = cmd.split()[1:], [], 0
    while i < len(args):
        if args[i] in MKBENCH_VALUE_OPTS:
            i += 2
            continue
        if not args[i].startswith("-"):
            names.append(args[i])
        i += 1
    return {TP_BENCHES[n] for n in names if n in TP_BENCHES} if names else set(TP_BENCHES.values())


def mkbench_short(cfg):
    return cfg.split()[0] + (" rested" if " rested" in cfg else "")  # "1x2 NVLink" -> "1x2" (--lead-cycles: rested)


def provenance(path):
    """(timed rounds, commit) a report records: mkbench's --iters (default 20) and meta commit ("X" or "X-dirty");
    the Python benches' "timing: N rounds" / "Median of N calls" and their commit words, whole: "commit X (tracked
    files modified)", and bench/dist_timing.py's "commit X[-dirty] (the library's build[; this tree: Y[ (tracked
    files modified)]])" (git_commits.parse reads them). None where a report does not say."""
    if path.endswith(".json"):
        meta = load_json(path).get("meta", {})
        m = re.search(r"--iters[ =](\d+)", meta.get("command", ""))
        return (int(m.group(1)) if m else 20), (f"commit {meta['commit']}" if meta.get("commit") else None)
    text = open(path).read()
    m = re.search(r"timing: (\d+) rounds", text) or re.search(r"Median of (\d+) calls", text)
    cm = re.search(r"(commit [0-9a-f]{7,40}(?:-dirty)?(?: \((?:tracked files modified|the library's build"
                   r"(?:; this tree: [^()\n]*(?:\([^()\n]*\))?)?)\))?)", text)
    return (int(m.group(1)) if m else None), (cm.group(1) if cm else None)
