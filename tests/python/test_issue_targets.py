"""CPU tests of tools/issue_targets.py: the open issues' targets checked against the two-GPU reports of
2026-12-01 (794f025, kept in bench/results/), whose misses the summary of that run lists by hand
(bench/results/h200x2-20261201T1010Z-summary.md), and the selection of the newest report per kind."""
import importlib.util
import io
import json
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parents[2]
RES = ROOT / "bench" / "results"
spec = importlib.util.spec_from_file_location("issue_targets", ROOT / "tools" / "issue_targets.py")
it = importlib.util.module_from_spec(spec)
spec.loader.exec_module(it)
import issue_reports  # noqa: E402  (tools/, put on the path by issue_targets.py)

REPORTS = ["mkbench-20261201T101520Z-1x2_NVLink.json", "mkbench-20261201T101542Z-2x1_emulated_nodes.json",
           "torch-tp-20261201T101627Z.md", "torch-ring-attn-20261201T101921Z.md",
           "torch-ring-attn-20261201T102203Z.md", "attention-20261201T071538Z.md"]
# The newest one-GPU attention report of the H200 with the LSE column (since session 44), every row of the grid.
ATTN = "attention-20261206T035322Z.md"
CHECK_COL = "mkernel vs fp32 (256 rows per rank: O rel Frobenius / LSE)"


def checks(files):
    c = it.Checks()
    for f in files:
        it.kind_of(str(f))[2](str(f), c)
    return c


def find(c, issue, target_part, where_part):
    hits = [(k, v) for k, v in c.items.items()
            if k[0].startswith(issue) and target_part in k[1] and k[2].startswith(where_part)]
    assert len(hits) == 1, (issue, target_part, where_part, hits)
    return hits[0][1]


def test_the_runs_of_2026_12_01():
    c = checks(RES / f for f in REPORTS)
    # AG+GEMM 1x2: 0.99x at M = 1024 only (0.343 ms overlap / 0.346 mkernel), eta met.
    seen, missed = find(c, "5", "best baseline", "AG+GEMM 1x2")
    assert seen == 5 and missed == ["M=1024: 0.9913x (best baseline 0.343 ms / mkernel 0.346 ms)"]
    assert find(c, "5", "eta >=", "AG+GEMM 1x2") == [3, []]
    # GEMM+RS 2x1 and AG+GEMM 2x1: every M met.
    assert find(c, "5", "best baseline", "GEMM+RS 2x1")[1] == []
    # vs PyTorch's fused GEMM+RS: 0.94/0.97/0.96/0.97/1.00x; 1.00 is 0.367 / 0.366: met.
    seen, missed = find(c, "5", "PyTorch", "GEMM+RS 1x2")
    assert seen == 5 and [m.split(":")[0] for m in missed] == ["M=1024", "M=2048", "M=4096", "M=8192"]
    # GEMM+AR 1x2: eta 0.86 at M = 4096 is the one eta miss; the ideal-speedup target misses M <= 4096.
    assert [m.split(" =")[0] for m in find(c, "6", "eta >=", "GEMM+AR 1x2")[1]] == ["M=4096: eta 0.8635"]
    assert [m.split(":")[0] for m in find(c, "6", "ideal", "GEMM+AR 1x2")[1]] == ["M=1024", "M=2048", "M=4096"]
    # Ring attention 1x2: 40 rows, 24 of them at S_local >= 8k; the engine beat flash in all 32 rows at D = 128.
    assert find(c, "7", "best baseline", "ring attention 1x2")[0] == 40
    assert find(c, "7", "eta >=", "ring attention 1x2")[0] == 24
    # (Before the ring bench checked mkernel's output at every shape and attention_bench.py its LSE, session 44:
    # those reports' rows are not shown right, every one a miss; they were taken as right before.)
    assert all("mkernel's output was not checked" in m for m in find(c, "7", "best baseline", "ring attention 1x2")[1])
    seen, missed = find(c, "7", "flash", "attention, one GPU")
    assert seen == 32 and len(missed) == 32 and all("no 'lse err' column" in m for m in missed)
    out = io.StringIO()
    assert it.report(c, out) is True
    assert "| eta >= 0.90 at M >= 4096 | GEMM+AR 1x2" in out.getvalue()


def test_a_missing_report_is_said(capsys):
    rc = it.main(["--strict", str(RES / REPORTS[0])])
    text = capsys.readouterr().out
    assert rc == 1
    assert "GEMM+AR 2x1: no mkbench report" in text and "ring attention 1x2: no torch-ring-attn report" in text


def test_newest_report_of_each_kind_and_config(tmp_path):
    for f in REPORTS:
        shutil.copy(RES / f, tmp_path / f)
    old = json.load(open(RES / REPORTS[0]))
    # An older 1x2 mkbench report beside the newer one: not read.
    (tmp_path / "mkbench-20261130T000000Z-1x2_NVLink.json").write_text(json.dumps(old))
    # A newer 1x2 one with other benchmarks only (issue_bench.sh misc: nvlink_count), and a newer one with GEMM+AR
    # only: neither hides the full report's other tables.
    misc = dict(old, tables=[{"title": "NVLink byte counters", "columns": ["x"], "rows": [["1"]]}])
    (tmp_path / "mkbench-20261202T000000Z-1x2_NVLink.json").write_text(json.dumps(misc))
    ar_only = dict(old, tables=[t for t in old["tables"] if t["title"].startswith("GEMM + AllReduce")])
    (tmp_path / "mkbench-20261203T000000Z-1x2_NVLink.json").write_text(json.dumps(ar_only))
    # One rank (1x1): not a configuration of the targets.
    one = dict(old, meta=dict(old["meta"], config="1x1"))
    (tmp_path / "mkbench-20261204T000000Z-1x1.json").write_text(json.dumps(one))
    picked = {pathlib.Path(p).name: ops for p, ops in it.select([str(tmp_path)], True)}
    assert picked["mkbench-20261201T101520Z-1x2_NVLink.json"] == {"AG+GEMM", "GEMM+RS"}
    assert picked["mkbench-20261203T000000Z-1x2_NVLink.json"] == {"GEMM+AR"}
    assert not any(n in picked for n in ("mkbench-20261130T000000Z-1x2_NVLink.json",
                                         "mkbench-20261202T000000Z-1x2_NVLink.json", "mkbench-20261204T000000Z-1x1.json"))
    assert set(picked) == (set(REPORTS) | {"mkbench-20261203T000000Z-1x2_NVLink.json"})
    assert len(it.select([str(tmp_path)], False)) == len(REPORTS) + 3  # every report but the 1x1 one


def test_another_regime_is_judged_beside_the_default_not_instead(tmp_path):
    # mkbench --lead-cycles (config "... rested") and torch_tp_bench.py --back-to-back (config "1x2 back-to-back")
    # time another power regime (bench/gpu_clocks.hpp): a newer such report keeps the default one, and its rows
    # are judged under their own name.
    for f in REPORTS:
        shutil.copy(RES / f, tmp_path / f)
    old = json.load(open(RES / REPORTS[0]))
    rested = dict(old, meta=dict(old["meta"], config="1x2 NVLink rested"))
    (tmp_path / "mkbench-20261206T000000Z-1x2_NVLink_rested.json").write_text(json.dumps(rested))
    tp = "torch-tp-20261201T101627Z.md"
    (tmp_path / "torch-tp-20261206T000000Z.md").write_text(
        open(RES / tp).read().replace("| 1x2 | ", "| 1x2 back-to-back | "))
    picked = {pathlib.Path(p).name for p, _ in it.select([str(tmp_path)], True)}
    assert {REPORTS[0], "mkbench-20261206T000000Z-1x2_NVLink_rested.json", tp,
            "torch-tp-20261206T000000Z.md"} <= picked
    c = it.Checks()
    for f, ops in it.select([str(tmp_path)], True):
        if it.kind_of(f)[0] == "mkbench-":
            it.check_mkbench(f, c, ops)
        elif it.kind_of(f)[0] == "torch-tp-":
            it.check_torch_tp(f, c)
    assert find(c, "5", "best baseline", "AG+GEMM 1x2 (")[0] == 5
    assert find(c, "5", "best baseline", "AG+GEMM 1x2 rested (")[0] == 5
    assert find(c, "5", "PyTorch", "AG+GEMM 1x2 (")[0] == 5
    assert find(c, "5", "PyTorch", "AG+GEMM 1x2 back-to-back (")[0] == 5


def test_an_untagged_regime_report_and_a_one_rank_torch_tp_run_do_not_replace_the_default(tmp_path):
    # Reports of the other regime written before their config said so (mkbench's timing meta names
    # --lead-cycles; torch_tp_bench's timing line names --back-to-back) are still judged apart; a torch-tp run at
    # one rank (a smoke run) is not judged at all.
    for f in REPORTS:
        shutil.copy(RES / f, tmp_path / f)
    old = json.load(open(RES / REPORTS[0]))
    lead = dict(old, meta=dict(old["meta"], timing="each interleaved call after its table's barrier and a GPU spin "
                                                    "of 2000000 cycles (--lead-cycles)"))
    (tmp_path / "mkbench-20261206T000000Z-1x2_NVLink.json").write_text(json.dumps(lead))
    tp = "torch-tp-20261201T101627Z.md"
    text = open(RES / tp).read()
    (tmp_path / "torch-tp-20261206T000000Z.md").write_text(
        text.replace("- timing: ", "- timing: (--back-to-back: the calls run back to back) ", 1))
    (tmp_path / "torch-tp-20261207T000000Z.md").write_text(text.replace("| 1x2 | ", "| 1x1 | "))
    picked = {pathlib.Path(p).name for p, _ in it.select([str(tmp_path)], True)}
    assert {REPORTS[0], tp, "mkbench-20261206T000000Z-1x2_NVLink.json", "torch-tp-20261206T000000Z.md"} <= picked
    assert "torch-tp-20261207T000000Z.md" not in picked
    c = it.Checks()
    it.check_mkbench(str(tmp_path / "mkbench-20261206T000000Z-1x2_NVLink.json"), c)
    it.check_torch_tp(str(tmp_path / "torch-tp-20261206T000000Z.md"), c)
    assert find(c, "5", "best baseline", "AG+GEMM 1x2 rested (")[0] == 5
    assert find(c, "5", "PyTorch", "AG+GEMM 1x2 back-to-back (")[0] == 5


def test_a_heading_right_after_a_table_belongs_to_the_next_one():
    text = "## AG+GEMM\n|a|b|\n|---|---|\n|1|2|\n## GEMM+RS\n|a|b|\n|---|---|\n|3|4|\n"
    assert issue_reports.md_tables(text) == [("AG+GEMM", [{"a": "1", "b": "2"}]), ("GEMM+RS", [{"a": "3", "b": "4"}])]


def test_every_report_kept_here_reads_without_error():
    c = it.Checks()
    for f, ops in it.select([str(RES)], False):
        (it.kind_of(f)[2](f, c) if ops is None else it.check_mkbench(f, c, ops))
    assert any(k[0].startswith("7") for k in c.items)


def _rows_where(path, keep):
    """The report's text with only the table rows `keep(cells)` accepts (headers and separators kept)."""
    out = []
    for line in open(path).read().splitlines():
        cells = [x.strip() for x in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells and cells[0] not in ("config",) and not set(line) <= set("|-: ") and not keep(cells):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def test_a_ring_run_split_in_two_reports_covers_the_grid_and_a_gap_is_a_miss(tmp_path):
    src = RES / "torch-ring-attn-20261201T101921Z.md"  # 1x2, the whole grid
    (tmp_path / "torch-ring-attn-20261205T010000Z.md").write_text(_rows_where(src, lambda c: c[1] == "1"))
    (tmp_path / "torch-ring-attn-20261205T020000Z.md").write_text(_rows_where(src, lambda c: c[1] == "4"))
    c = it.Checks()
    files = [f for f, _ in it.select([str(tmp_path)], True)]
    assert len(files) == 2  # both kept: rows merge per shape
    it.check_ring(files, c)
    seen = sum(v[0] for k, v in c.items.items() if "best baseline" in k[1])
    assert seen == 40
    assert not any(k[1] == "(benchmark report)" for k in c.items)
    # The B = 4 half alone: its 20 missing rows are misses, named.
    c = it.Checks()
    it.check_ring([str(tmp_path / "torch-ring-attn-20261205T020000Z.md")], c)
    missed = find(c, "7", "(benchmark report)", "ring attention 1x2")[1]
    assert len(missed) == 20 and missed[0].startswith("B=1 Hkv=32 S_local=2048 causal=yes: no row")


def test_a_failed_cell_is_a_miss_not_a_number(tmp_path):
    src = RES / "torch-tp-20261201T101627Z.md"
    text = open(src).read().replace("| 1x2 | 1024 | 0.383 | 0.398 |",
                                    "| 1x2 | 1024 | 0.383 | unavailable: not in torch 2.15 |", 1)
    assert "unavailable" in text
    f = tmp_path / "torch-tp-20261205T000000Z.md"
    f.write_text(text)
    c = it.Checks()
    it.check_torch_tp(str(f), c)
    missed = find(c, "5", "PyTorch", "AG+GEMM 1x2")[1]
    assert any(m.startswith("M=1024: not measured") for m in missed), missed


def test_an_mkbench_table_without_an_m_of_the_grid_misses_it(tmp_path):
    d = json.load(open(RES / REPORTS[0]))
    for t in d["tables"]:
        t["rows"] = [r for r in t["rows"] if str(r[0]) != "16384"]
    f = tmp_path / "mkbench-20261205T000000Z-1x2_NVLink.json"
    f.write_text(json.dumps(d))
    c = it.Checks()
    it.check_mkbench(str(f), c)
    assert "M=16384: no row (a partial run?)" in find(c, "5", "(benchmark report)", "AG+GEMM 1x2")[1]


def _rewrite_tables(text, header_cells, row_cells):
    """A report's text with every markdown table line rewritten: the header's cells by header_cells(cells), each
    separator by the header's count of '---', each row's by row_cells(header, cells); other lines as they are."""
    out, header = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cs = [x.strip() for x in line.strip().strip("|").split("|")]
            if header is None:
                header, cs = cs, header_cells(cs)
            elif set(line) <= set("|-: "):
                cs = ["---"] * len(header_cells(header))
            else:
                cs = row_cells(header, cs)
            line = "| " + " | ".join(cs) + " |"
        else:
            header = None
        out.append(line)
    return "\n".join(out) + "\n"


def _ring_2x2_report(tmp_path, edit=lambda text: text):
    """A 2x2 emu ring report (tools/issue_bench.sh multi-ring's --quick grid: B 1, S_local 8k) made from the
    2026-12-01 2x1 one, `edit` applied to its text; written to tmp_path, its path returned."""
    src = open(RES / "torch-ring-attn-20261201T102203Z.md").read()
    text = edit(_rewrite_tables(src, lambda h: h, lambda h, cs: [c.replace("2x1 emu", "2x2 emu") for c in cs]))
    f = tmp_path / "torch-ring-attn-20261207T000000Z.md"
    f.write_text("\n".join(line for line in text.splitlines()
                           if not line.startswith("| 2x2") or " | 1 | " in line and " | 8192 | " in line))
    return f


def _edit_rows(text, match, cells):
    """A report's text with `cells` (column name -> new text) set in the table rows `match(row dict)` accepts."""
    def row(header, cs):
        if match(dict(zip(header, cs))):
            for k, v in cells.items():
                cs[header.index(k)] = v
        return cs
    return _rewrite_tables(text, lambda h: h, row)


def _mk_edit(d, op, m, cells):
    """Set cells (column name -> text) of row M = m of mkbench report d's table of op."""
    t = next(t for t in d["tables"] if it.tp_op(t["title"]) == op)
    row = next(r for r in t["rows"] if str(r[0]) == str(m))
    for k, v in cells.items():
        row[t["columns"].index(k)] = v


def _mk_report(tmp_path, src, name, *edits):
    d = json.load(open(RES / src))
    for op, m, cells in edits:
        _mk_edit(d, op, m, cells)
    f = tmp_path / name
    f.write_text(json.dumps(d))
    return d, f


def test_a_failed_mkbench_run_is_a_miss_on_both_tp_issues(tmp_path):
    # mkbench writes the tables it finished when a later one fails, with meta "failed" (bench/mkbench.cpp).
    d, f = _mk_report(tmp_path, REPORTS[0], "mkbench-20261205T000000Z-1x2_NVLink.json")
    d["meta"]["failed"] = "gemm_ar: rank 0 role Compute timed out after 5000 ms waiting on signal 12"
    d["tables"] = [t for t in d["tables"] if "AllReduce" not in t["title"]]
    f.write_text(json.dumps(d))
    it.load_json.cache_clear()
    c = it.Checks()
    it.check_mkbench(str(f), c)
    # The op whose table is absent: the run's failure is its miss. The tables it finished are judged as they are.
    _, missed = find(c, "6", "(benchmark report)", "GEMM+AR 1x2 (")
    assert missed and missed[0].startswith("the run failed: gemm_ar: rank 0 role Compute timed out"), missed
    assert not any(k[0].startswith("5") and k[1] == "(benchmark report)" for k in c.items)
    assert find(c, "5", "best baseline", "AG+GEMM 1x2 (")[0] == 5


def test_thresholds_are_judged_on_unrounded_values(tmp_path):
    # AG+GEMM 1x2 M=4096: eta 1.336 / 1.4926 = 0.8951, printed 0.90 (the old check read the printed cell).
    # GEMM+AR 1x2 M=8192: speedup 3.109 / 2.914 = 1.0669x of the ideal (2.616 + 0.497) / 2.616 = 1.1900x: 0.8966,
    # printed 0.90 (T_comm: serial's own all-reduce, NCCL's 0.497 ms, not the fastest, mk's 0.487). M=16384: no
    # ideal in its cell: a miss, not skipped.
    _, f = _mk_report(tmp_path, REPORTS[0], "mkbench-20261205T000000Z-1x2_NVLink.json",
                      ("AG+GEMM", 4096, {"mkernel ms": "1.4926", "eta": "0.90"}),
                      ("GEMM+AR", 8192, {"mkernel ms": "2.914", "achieved / ideal": "0.90"}),
                      ("GEMM+AR", 16384, {"ideal speedup (T_gemm + T_comm) / max": "-"}))
    c = it.Checks()
    it.check_mkbench(str(f), c)
    assert [m.split(" =")[0] for m in find(c, "5", "eta >=", "AG+GEMM 1x2")[1]] == ["M=4096: eta 0.8951"]
    missed = find(c, "6", "ideal", "GEMM+AR 1x2")[1]
    assert any(m.startswith("M=8192: 1.0669x of ideal 1.1900x (0.8966 < 0.9") for m in missed), missed
    assert "M=16384: no ideal ('-')" in missed
    # Ring 1x2 B=1 Hkv=32 S_local=8192 causal: T_lb 1.724 (compute mkernel) / 1.926 = 0.8951, printed 0.90.
    src = _current_ring(open(RES / "torch-ring-attn-20261201T101921Z.md").read())
    ring = tmp_path / "torch-ring-attn-20261205T000000Z.md"
    shape = lambda r: (r["B"], r["Hkv"], r["S_local"], r["causal"]) == ("1", "32", "8192", "yes")  # noqa: E731
    ring.write_text(_edit_rows(src, shape, {"mkernel ms": "1.926", "eta mkernel": "0.90"}))
    c = it.Checks()
    it.check_ring([str(ring)], c)
    missed = find(c, "7", "eta >=", "ring attention 1x2")[1]
    assert any(m.startswith("B=1 Hkv=32 S_local=8192 causal=yes: eta 0.8951 = T_lb 1.7240 ms / mkernel 1.9260 ms")
               for m in missed), missed


def test_emulated_nodes_take_the_link_floor_and_an_eta_above_one_is_said(tmp_path):
    assert it.knob_default("MK_EMU_GBPS", 0) == 50  # include/mkernel/knob_list.inc
    assert it.knob_default("MK_GPU_TEST_STEP_S", 0) == 240  # (an MK_TOOL_KNOB)
    c = checks([RES / REPORTS[1]])
    # GEMM+RS 2x1 M=1024 printed eta 1.10 (comm alone: mkernel's own RS, 0.456 ms); the link floor 8.4 MB / 50 GB/s
    # = 0.168 ms is below the GEMM's 0.303 ms: eta 0.303 / 0.414 = 0.7319 (not tight before: 1.10).
    floors = {(w.split(" (")[0], row): why for _, w, row, why in c.floors}
    assert floors["GEMM+RS 2x1", "M=1024"].startswith("eta 0.7319 = T_lb 0.3030 ms / mkernel 0.4140 ms; T_lb: compute")
    # GEMM+AR 2x1 M=1024: the floor 16.8 MB / 50 GB/s = 0.336 ms is below mkernel's AR alone (0.609 ms).
    assert "T_lb: link floor 0.3360 ms = 16.8 MB / 50 GB/s (MK_EMU_GBPS default; measured comm alone 0.6090 ms)" \
        in floors["GEMM+AR 2x1", "M=1024"]
    # One NVLink row is not floored.
    assert "link floor" not in "".join(why for _, w, _, why in checks([RES / REPORTS[0]]).floors)
    # A rate the report records wins over the default; an mkernel faster than T_lb meets the target and its
    # floor is said not to be tight.
    d, f = _mk_report(tmp_path, REPORTS[1], "mkbench-20261205T000000Z-2x1_emulated_nodes.json",
                      ("GEMM+AR", 4096, {"mkernel ms": "1.300"}))
    c = it.Checks()
    it.check_mkbench(str(f), c)
    assert not any(m.startswith("M=4096") for m in find(c, "6", "eta >=", "GEMM+AR 2x1")[1])
    floors = {(w.split(" (")[0], row): why for _, w, row, why in c.floors}
    assert floors["GEMM+AR 2x1", "M=4096"].startswith("eta 1.0323") and "not tight" in floors["GEMM+AR 2x1", "M=4096"]
    d["meta"]["command"] += " (MK_EMU_GBPS=25)"
    f.write_text(json.dumps(d))
    it.load_json.cache_clear()
    c = it.Checks()
    it.check_mkbench(str(f), c)
    floors = {(w.split(" (")[0], row): why for _, w, row, why in c.floors}
    # (0.672 ms, above the measured 0.609 ms: the measured one bounds, the floor is said)
    assert floors["GEMM+AR 2x1", "M=1024"].endswith(
        "T_lb: comm alone measured 0.6090 ms (link floor 0.6720 ms = 16.8 MB / 25 GB/s, recorded)")
    # Ring 2x1 emu: the floor (134.2 MB / 50 GB/s = 2.684 ms < comm mkernel 2.887 ms) bounds B=1 Hkv=32 8k causal;
    # B=4 Hkv=32 S_local=32k causal: compute cudnn 124.539 ms / mkernel 119.317 ms = 1.0438: met, not tight.
    ring = tmp_path / "torch-ring-attn-20261205T000000Z.md"  # (with the columns today's bench writes)
    ring.write_text(_current_ring(open(RES / "torch-ring-attn-20261201T102203Z.md").read()))
    c = checks([ring])
    floors = {row: why for _, _, row, why in c.floors}
    assert "T_lb: link floor 2.6840 ms = 134.2 MB / 50 GB/s" in floors["B=1 Hkv=32 S_local=8192 causal=yes"]
    assert floors["B=4 Hkv=32 S_local=32768 causal=yes"].startswith("eta 1.0438")
    assert floors["B=4 Hkv=32 S_local=32768 causal=yes"].endswith("(above 1: this floor is not tight)")
    assert not any(m.startswith("B=4 Hkv=32 S_local=32768 causal=yes")
                   for m in find(c, "7", "eta >=", "ring attention 2x1")[1])
    out = io.StringIO()
    it.report(c, out)
    assert "## eta of every row" in out.getvalue() and "link floor 2.6840 ms" in out.getvalue()


def test_partial_torch_tp_and_attention_reports_miss_the_grid(tmp_path):
    src = RES / "torch-tp-20261201T101627Z.md"
    f = tmp_path / "torch-tp-20261205T000000Z.md"
    f.write_text(_rows_where(src, lambda c: c[1] == "4096"))
    c = it.Checks()
    it.check_torch_tp(str(f), c)
    seen, missed = find(c, "5", "PyTorch", "AG+GEMM 1x2")
    assert seen == 5 and [m for m in missed if "no row" in m] == [f"M={m}: no row (a partial run?)"
                                                                   for m in (1024, 2048, 8192, 16384)]
    assert len([m for m in find(c, "6", "PyTorch", "GEMM+AR 1x2")[1] if "no row" in m]) == 4
    # An attention report with one row of the engine grid (32 rows at D = 128): 31 misses.
    src = RES / ATTN
    f = tmp_path / "attention-20261207T000000Z.md"
    f.write_text(_rows_where(src, lambda c: c[0] == "B" or c[:6] == ["1", "8192", "32", "32", "128", "1"]))
    c = it.Checks()
    it.check_attention(str(f), c)
    seen, missed = find(c, "7", "flash", "attention, one GPU")
    assert seen == 32 and len(missed) == 31 and all("no row" in m for m in missed)
    assert len(it.ATTN_GRID) == 32


def test_a_wrong_attention_output_is_a_miss(tmp_path):
    src = open(RES / ATTN).read()
    def row(s, causal):
        return lambda r: (r["B"], r["S"], r["Hkv"], r["D"], r["causal"]) == ("1", s, "8", "128", causal)
    text = _edit_rows(src, row("4096", "0"), {"err": "2.0e-02"})
    text = _edit_rows(text, row("8192", "1"), {"err": "nan"})
    f = tmp_path / "attention-20261205T000000Z.md"
    f.write_text(text)
    c = it.Checks()
    it.check_attention(str(f), c)
    assert find(c, "7", "flash", "attention, one GPU")[1] == [
        "B=1 S=4096 Hkv=8 causal=0: wrong output (err '2.0e-02', bound 0.01)",
        "B=1 S=8192 Hkv=8 causal=1: wrong output (err 'nan', bound 0.01)"]


def test_failed_ring_and_torch_tp_rows_are_misses(tmp_path):
    # torch_ring_attn_bench.py writes 'failed' in the cells of a variant or shape that failed (out of memory...).
    src = _current_ring(open(RES / "torch-ring-attn-20261201T101921Z.md").read())
    f = tmp_path / "torch-ring-attn-20261205T000000Z.md"
    f.write_text(_edit_rows(src, lambda r: (r["B"], r["Hkv"], r["S_local"], r["causal"]) == ("4", "8", "32768", "no"),
                            {"mkernel ms": "failed", "mkernel TFLOP/s": "failed", "eta mkernel": "-"}))
    c = it.Checks()
    it.check_ring([str(f)], c)
    assert any(m.startswith("B=4 Hkv=8 S_local=32768 causal=no: not measured")
               for m in find(c, "7", "best baseline", "ring attention 1x2")[1])
    assert "B=4 Hkv=8 S_local=32768 causal=no: eta not measured" in find(c, "7", "eta >=", "ring attention 1x2")[1]
    # torch_tp_bench.py's row of a shape that failed (every cell 'failed', the reason below the table).
    src = RES / "torch-tp-20261201T101627Z.md"
    text = open(src).read().replace("| 1x2 | 2048 | 0.697 | 0.670 | 0.691 | 1.04 | 0.97 | 1.01 |",
                                    "| 1x2 | 2048 | failed | failed | failed | failed | failed | failed |")
    f = tmp_path / "torch-tp-20261205T000000Z.md"
    f.write_text(text)
    c = it.Checks()
    it.check_torch_tp(str(f), c)
    assert any(m.startswith("M=2048: not measured") for m in find(c, "5", "PyTorch", "GEMM+RS 1x2")[1])


def test_ring_parts_fetched_into_separate_folders_merge(tmp_path, capsys):
    # tools/wip/README.md's session: ring1x2 and ring1x2b (and ring2x1, ring2x1b) are separate device calls, each
    # coming back as its own folder; issue_targets.py gets them all and merges the rows per shape.
    for cfg_src, a, b in (("torch-ring-attn-20261201T101921Z.md", "r12a", "r12b"),
                          ("torch-ring-attn-20261201T102203Z.md", "r21a", "r21b")):
        src = RES / cfg_src
        for d, batch, stamp in ((a, "1", "010000"), (b, "4", "020000")):
            (tmp_path / d).mkdir()
            (tmp_path / d / f"torch-ring-attn-20261205T{stamp}Z.md").write_text(
                _rows_where(src, lambda c: c[1] == batch))
    dirs = [str(tmp_path / d) for d in ("r12a", "r12b", "r21a", "r21b")]
    assert len(it.select(dirs, True)) == 4
    it.main(dirs)
    text = capsys.readouterr().out
    assert "no torch-ring-attn report" not in text and "no row" not in text
    assert "| never slower than the best baseline | ring attention 1x2 (" in text
    c = it.Checks()
    it.check_ring([f for f, _ in it.select(dirs, True)], c)
    assert sum(v[0] for k, v in c.items.items() if "best baseline" in k[1]) == 80


def test_on_emulated_nodes_only_allgather_mk_baselines_can_be_the_best(tmp_path):
    # The 2x1 report of 2026-12-01 named NCCL baselines (over NVLink) best; it has no allgather-mk columns, so
    # no row has a valid baseline (each row says which columns it lacks). A report with the columns is judged
    # against them, whatever its cell names. (Before the fix of a partial header, one allgather-mk column was
    # enough; both are the config's candidates now.)
    src = RES / "torch-ring-attn-20261201T102203Z.md"
    c = it.Checks()
    it.check_ring([str(src)], c)
    missed = find(c, "7", "best baseline", "ring attention 2x1")[1]
    assert len(missed) == 40 and all("no allgather-mk cudnn, allgather-mk-overlap cudnn columns: a --only run? (on "
                                     "emulated nodes only the allgather-mk baselines can be the best one" in m
                                     for m in missed), missed[0]
    # The same rows with the allgather-mk columns: 1.5x mkernel's time (0.5x at one shape) and 2x, output checked.
    mks = {}

    def mk_times(factor):
        def cell(r):
            key = (r["B"], r["Hkv"], r["S_local"], r["causal"])
            mks[key] = float(r["mkernel ms"])
            return f"{mks[key] * (0.5 if factor == 1.5 and key == ('1', '8', '2048', 'no') else factor):.4f}"
        return cell
    f = tmp_path / "torch-ring-attn-20261205T000000Z.md"
    f.write_text(_current_ring(open(src).read(), mk_times(1.5), mk_times(2.0)))
    c = it.Checks()
    it.check_ring([str(f)], c)
    missed = find(c, "7", "best baseline", "ring attention 2x1")[1]
    mk = mks[("1", "8", "2048", "no")]
    assert len(mks) == 40 and len(missed) == 1 and missed[0].startswith("B=1 Hkv=8 S_local=2048 causal=no: 0.5")
    assert f"mkernel {mk:.3f} ms" in missed[0], missed


def test_reports_with_fewer_than_20_rounds_are_misses_and_provenance_is_listed(capsys):
    # The ring reports of 2026-12-01 ran 8 (1x2) and 6 (2x1) rounds; mkbench and torch-tp 20.
    assert it.provenance(str(RES / "torch-ring-attn-20261201T101921Z.md")) == (8, "commit 794f025")
    assert it.provenance(str(RES / "mkbench-20261201T101520Z-1x2_NVLink.json")) == (20, "commit 794f02543ced")
    assert it.provenance(str(RES / "attention-20261205T023307Z.md")) == (20, "commit 7557ab9 (tracked files modified)")
    it.main([str(RES / f) for f in REPORTS])
    text = capsys.readouterr().out
    assert "| at least 20 timed rounds (MEASURING.md) | `torch-ring-attn-20261201T101921Z.md` | 1 | 1: 8 rounds |" in text
    assert "| at least 20 timed rounds (MEASURING.md) | `torch-ring-attn-20261201T102203Z.md` | 1 | 1: 6 rounds |" in text
    assert "| at least 20 timed rounds (MEASURING.md) | `mkbench-20261201T101520Z-1x2_NVLink.json` | 1 | none (met) |" in text
    assert "mkbench-20261201T101520Z-1x2_NVLink.json` (AG+GEMM, GEMM+AR, GEMM+RS) - commit 794f02543ced, 20 rounds" in text


def test_a_ring_report_whose_rows_were_all_superseded_is_not_judged_for_its_rounds(tmp_path, capsys):
    # An 8-round report, and the same rows later at 20 rounds: only the report that supplies rows is judged.
    old = RES / "torch-ring-attn-20261201T101921Z.md"
    shutil.copy(old, tmp_path / old.name)
    (tmp_path / "torch-ring-attn-20261205T000000Z.md").write_text(
        open(old).read().replace("timing: 8 rounds", "timing: 20 rounds"))
    it.main([str(tmp_path)])
    text = capsys.readouterr().out
    assert "| at least 20 timed rounds (MEASURING.md) | `torch-ring-attn-20261205T000000Z.md` | 1 | none (met) |" in text
    assert "`torch-ring-attn-20261201T101921Z.md` | 1 | 1: 8 rounds" not in text


def test_measured_network_bytes_are_judged_against_the_formula(tmp_path):
    # 2x1 (2026-12-01): every row's measured network MB equals the formula; one edited row does not.
    c = checks([RES / REPORTS[1]])
    seen, missed = find(c, "5", "network bytes", "AG+GEMM 2x1")
    assert seen == 5 and missed == []
    assert find(c, "6", "network bytes", "GEMM+AR 2x1")[1] == []
    _, f = _mk_report(tmp_path, REPORTS[1], "mkbench-20261205T000000Z-2x1_emulated_nodes.json",
                      ("GEMM+RS", 4096, {"MB sent per GPU (NVLink / network; measured network)":
                                                   "0.0 / 33.6 (measured 40.2)"}))
    c = it.Checks()
    it.check_mkbench(str(f), c)
    assert find(c, "5", "network bytes", "GEMM+RS 2x1")[1] == ["M=4096: measured 40.2 MB, formula 33.6 MB"]
    # one node: nothing crosses a network, nothing to judge
    assert not any("network bytes" in k[1] for k in checks([RES / REPORTS[0]]).items)
    # ring attention on 2x1 emu (2026-12-01): the 40 rows' measured bytes equal the formula
    c = it.Checks()
    it.check_ring([str(RES / "torch-ring-attn-20261201T102203Z.md")], c)
    assert find(c, "7", "network bytes", "ring attention 2x1") == [40, []]


def test_the_swept_overlap_cell_reads_as_its_time(tmp_path):
    # mkbench's RS/AR overlap baselines sweep the chunk count S: the overlap cell reads "0.343 (S=4)" and a last
    # column lists every S. The judge reads the time and ignores the new column: the same verdicts as the plain
    # cells (the 1x2 report of 2026-12-01 with its overlap cells rewritten that way).
    d = json.load(open(RES / REPORTS[0]))
    for t in d["tables"]:
        if "2-stream chunked overlap ms" in t["columns"]:
            i = t["columns"].index("2-stream chunked overlap ms")
            t["columns"].append("2-stream overlap ms by chunk count S")
            for r in t["rows"]:
                r.append(f"S=2: 9.999 / S=4: {r[i]}")
                r[i] = f"{r[i]} (S=4)"
    f = tmp_path / "mkbench-20261205T000000Z-1x2_NVLink.json"
    f.write_text(json.dumps(d))
    it.load_json.cache_clear()
    swept, plain = it.Checks(), it.Checks()
    it.check_mkbench(str(f), swept)
    it.check_mkbench(str(RES / REPORTS[0]), plain)
    names = (f.name, REPORTS[0])
    strip = lambda c, n: {(k[0], k[1], k[2].replace(n, "")): v for k, v in c.items.items()}  # noqa: E731
    assert strip(swept, names[0]) == strip(plain, names[1]) and len(swept.items) >= 6
    assert find(swept, "6", "eta >=", "GEMM+AR 1x2")[1][0].startswith("M=4096: eta 0.8635")


def test_the_per_round_range_is_said_beside_a_miss(tmp_path):
    # mkbench's TP tables end with best / mkernel round by round (p10 / median / p90). The verdict stays the ratio
    # of medians; a miss whose p90 reaches 1 is said to be within the run's spread, and a met target is unchanged.
    d = json.load(open(RES / REPORTS[0]))
    for t in d["tables"]:
        if "mkernel ms" in t["columns"] and "serial ms" in t["columns"]:
            t["columns"].append("mkernel vs best baseline per round (p10 / median / p90)")
            for r in t["rows"]:
                r.append("0.975 / 0.992 / 1.004")
    f = tmp_path / "mkbench-20261205T000000Z-1x2_NVLink.json"
    f.write_text(json.dumps(d))
    it.load_json.cache_clear()
    c = it.Checks()
    it.check_mkbench(str(f), c)
    seen, missed = find(c, "5", "best baseline", "AG+GEMM 1x2")
    assert seen == 5 and missed == ["M=1024: 0.9913x (best baseline 0.343 ms / mkernel 0.346 ms; per round "
                                    "p10/median/p90 0.9750/0.9920/1.0040, within the run's spread)"]


def _add_column(text, name, cell):
    """A report's text with a column `name` appended to its tables, `cell(row dict)` in each row."""
    return _rewrite_tables(text, lambda h: h + [name], lambda h, cs: cs + [cell(dict(zip(h, cs)))])


def _current_ring(text, mk_cudnn=lambda r: "999.000", mk_overlap=lambda r: "999.000",
                  check=lambda r: "3.1e-03 / 2.0e-05"):
    """A ring report of 2026-12-01 with the columns today's bench writes and those reports lack: the allgather-mk
    baselines (cell(row dict): by default slower than every other baseline, so the best one stays the report's)
    and the check of mkernel's output against fp32 (by default within the issue's bounds). With them, the judge
    takes their rows as measured; without, every row is a miss (a partial header, an output not checked)."""
    text = _add_column(text, "allgather-mk cudnn ms", mk_cudnn)
    text = _add_column(text, "allgather-mk-overlap cudnn ms", mk_overlap)
    return _add_column(text, CHECK_COL, check)


def test_a_ring_miss_says_its_per_round_range_when_the_report_named_the_same_best(tmp_path):
    # The ring bench's per-round column (best baseline / mkernel round by round) reads beside a verdict only where
    # the report's best baseline is the judge's: on 1x2 it is (the 2026-12-01 report, its rows given the column).
    src = _current_ring(open(RES / "torch-ring-attn-20261201T101921Z.md").read())
    text = _add_column(src, "mkernel vs best baseline per round (p10 / median / p90)",
                       lambda r: "0.950 / 0.986 / 1.010")
    f = tmp_path / "torch-ring-attn-20261205T000000Z.md"
    f.write_text(text)
    c = it.Checks()
    it.check_ring([str(f)], c)
    missed = find(c, "7", "best baseline", "ring attention 1x2")[1]
    row = next(m for m in missed if m.startswith("B=1 Hkv=8 S_local=16384 causal=no"))
    assert row.endswith("(best baseline 13.237 ms / mkernel 13.419 ms; per round p10/median/p90 "
                        "0.9500/0.9860/1.0100, within the run's spread)"), row
    assert len(missed) == 7  # the same misses as without the column
    # A report whose named best baseline is not the judge's (an emulated-node report from before the rule named an
    # NVLink baseline): the column is not quoted for it.
    r = {"best baseline": "ring cudnn (0.293 ms)", "mkernel vs best baseline per round (p10 / median / p90)":
         "0.950 / 0.986 / 1.010"}
    assert it.paired_spread(r, False, 0.301) == ""
    assert it.paired_spread(r, False, 0.293).endswith("within the run's spread")


def test_a_ring_row_whose_output_check_fails_is_a_wrong_output(tmp_path):
    # Since session 44 the ring bench checks mkernel's output at every timed shape against fp32 (256 sampled rows,
    # O / LSE): a row above the issue's bounds (1e-2 / 1e-3) or not checked is a miss whatever its speed; rows
    # within them are judged on speed as before. (A report without the column was judged as before: now each of
    # its rows is a wrong output: test_issue_targets_audit.py.)
    src = open(RES / "torch-ring-attn-20261201T101921Z.md").read()
    bad = {("1", "32", "8192", "yes"): "3.0e-03 / 2.0e-03", ("1", "8", "2048", "no"): "not checked: OutOfMemoryError",
           ("4", "8", "4096", "yes"): "2.0e-02 / 1.0e-05"}
    f, good = tmp_path / "torch-ring-attn-20261205T000000Z.md", tmp_path / "torch-ring-attn-20261204T000000Z.md"
    f.write_text(_current_ring(src, check=lambda r: bad.get((r["B"], r["Hkv"], r["S_local"], r["causal"]),
                                                            "3.1e-03 / 2.0e-05")))
    good.write_text(_current_ring(src))
    c, old = it.Checks(), it.Checks()
    it.check_ring([str(f)], c)
    it.check_ring([str(good)], old)
    missed = find(c, "7", "best baseline", "ring attention 1x2")[1]
    wrong = sorted(m for m in missed if "wrong output" in m)
    assert [m.split(":")[0] for m in wrong] == [
        "B=1 Hkv=32 S_local=8192 causal=yes", "B=1 Hkv=8 S_local=2048 causal=no", "B=4 Hkv=8 S_local=4096 causal=yes"]
    assert "(mkernel vs fp32, O / LSE: '3.0e-03 / 2.0e-03'; bounds 0.01 / 0.001)" in wrong[0]
    # Every other row: the same verdict as with every row's output right.
    others = [m for m in missed if "wrong output" not in m]
    old_missed = find(old, "7", "best baseline", "ring attention 1x2")[1]
    assert len(old_missed) == 7 and others == [
        m for m in old_missed if not any(m.startswith("B={} Hkv={} S_local={} causal={}:".format(*k)) for k in bad)]


def test_an_attention_row_with_a_wrong_lse_is_a_miss(tmp_path):
    # Since session 44 attention_bench.py checks out and lse against fp32: 'lse err' above 1e-3 (or nan) is a miss.
    src = open(RES / "attention-20261201T071538Z.md").read()
    lse = {("1", "4096", "8", "0"): "2.0e-03", ("1", "8192", "8", "1"): "nan"}
    text = _add_column(src, "lse err", lambda r: lse.get((r["B"], r["S"], r["Hkv"], r["causal"]), "1.0e-05"))
    f = tmp_path / "attention-20261205T000000Z.md"
    f.write_text(text)
    c = it.Checks()
    it.check_attention(str(f), c)
    wrong = [m for m in find(c, "7", "flash", "attention, one GPU")[1] if "LSE" in m]
    assert wrong == ["B=1 S=4096 Hkv=8 causal=0: wrong LSE (lse err '2.0e-03', bound 0.001)",
                     "B=1 S=8192 Hkv=8 causal=1: wrong LSE (lse err 'nan', bound 0.001)"], wrong


def test_a_one_rank_ring_report_is_not_judged(tmp_path):
    # torchrun --nproc_per_node=1 bench/torch_ring_attn_bench.py (a smoke run on one GPU): config 1x1, not one of
    # the issue's (1x2, 2x1 emu): no rows judged, no "no row" misses for its grid.
    src = open(RES / "torch-ring-attn-20261201T101921Z.md").read()
    f = tmp_path / "torch-ring-attn-20261205T000000Z.md"
    f.write_text(src.replace("| 1x2 |", "| 1x1 |"))
    c, control = it.Checks(), it.Checks()
    it.check_ring([str(f)], c)
    it.check_ring([str(RES / "torch-ring-attn-20261201T101921Z.md")], control)
    assert not c.items, list(c.items)
    assert any("ring attention 1x2" in k[2] for k in control.items)  # (the same report as 1x2 is judged)


def test_a_shared_gpu_mkbench_report_is_not_judged(tmp_path):
    # mkbench with ranks sharing one GPU (MK_SHARE_GPUS; the baselines on mkernel's collectives, a host barrier): a
    # correctness run whose times are no measurements. It neither hides the newest real report nor is judged.
    for f in REPORTS[:1]:
        shutil.copy(RES / f, tmp_path / f)
    d = json.load(open(RES / REPORTS[0]))
    d["meta"] = dict(d["meta"], config="1x2 NVLink shared-GPU", shared_gpus="yes: a correctness run")
    shared = tmp_path / "mkbench-20261205T000000Z-1x2_NVLink_shared-GPU.json"
    shared.write_text(json.dumps(d))
    it.load_json.cache_clear()
    picked = [pathlib.Path(p).name for p, _ in it.select([str(tmp_path)], True)]
    assert picked == [REPORTS[0]], picked
    c = it.Checks()
    it.check_mkbench(str(shared), c)
    assert not c.items


def test_a_p90_rounded_to_one_is_not_within_the_spread():
    # A p90 of 0.9996 printed with 3 decimals read "1.000" and was taken as reaching 1 (session 45's cells): the
    # cells now have 4 decimals, and a p90 printed as 1 (a rounded value at any precision) is not taken as above 1.
    miss = it.spread_note("0.9900 / 0.9950 / 0.9996", False)
    assert miss == "; per round p10/median/p90 0.9900/0.9950/0.9996", miss
    assert "within" not in it.spread_note("0.990 / 0.995 / 1.000", False)
    assert "within" not in it.spread_note("0.9900 / 0.9950 / 1.0000", False)
    assert it.spread_note("0.9900 / 0.9950 / 1.0001", False).endswith(", within the run's spread")
    assert it.spread_note("0.990 / 0.995 / 1.001", False).endswith(", within the run's spread")
    assert "within" not in it.spread_note("0.9900 / 1.0050 / 1.0200", True)  # a met target needs no note
    assert it.spread_note("-", False) == "" and it.spread_note("", False) == ""


def test_a_ring_network_count_is_judged_on_every_rank_not_the_lowest(tmp_path):
    # The cell reads "formula / lo-hi" (min-max over ranks) where ranks differ: only lo was compared, so a rank that
    # sent more than the formula passed (first seen where more GPUs a node make uneven traffic possible).
    src = open(RES / "torch-ring-attn-20261201T102203Z.md").read()
    col = "network MB per GPU per mkernel call (formula / measured)"
    cells = {"2048": "33.6 / 33.6-40.2", "4096": "67.1 / 67.1"}  # one rank above the formula; all ranks equal
    text = _rewrite_tables(src, lambda h: h, lambda h, cs: [
        cells.get(dict(zip(h, cs))["S_local"], c) if name == col and dict(zip(h, cs))["causal"] == "yes"
        and dict(zip(h, cs))["B"] == "1" and dict(zip(h, cs))["Hkv"] == "32" else c for name, c in zip(h, cs)])
    f = tmp_path / "torch-ring-attn-20261205T000000Z.md"
    f.write_text(text)
    c = it.Checks()
    it.check_ring([str(f)], c)
    missed = find(c, "7", "network bytes per GPU measured", "ring attention 2x1")[1]
    assert missed == ["B=1 Hkv=32 S_local=2048 causal=yes: measured 33.6-40.2 MB, formula 33.6 MB"], missed


def test_runs_of_more_gpus_are_judged_on_issue_9s_quick_grid_and_its_layouts_required(tmp_path):
    # A 2x2 ring report (tools/issue_bench.sh multi-ring: --quick, B 1 and S_local 8k) was held to issue 7's whole
    # grid (36 "no row" misses), and the judge said nothing of the layouts and ops issue 9 still lacked, while
    # asking for 1x2 / 2x1 reports the run was not about.
    f = _ring_2x2_report(tmp_path)
    c = it.Checks()
    it.check_ring([str(f)], c)
    it.need_absent(c)
    assert not [k for k in c.items if "no row" in " ".join(map(str, c.items[k][1]))], "the quick grid is whole"
    needs = sorted(k[2] for k, v in c.items.items() if k[0] == it.MULTI_ISSUE and v[0] == 0)
    assert needs == sorted([f"{op} {cfg}: no report (tools/issue_bench.sh multi-tp OUT {n})"
                            for op in it.TP_OPS for cfg, n in (("2x2", 2), ("1x4", 4))]
                           + ["ring attention 1x4: no report (tools/issue_bench.sh multi-ring OUT 4)"]), needs
    # Issues 5-7 still need their two-GPU reports, whatever else was given (the run of more GPUs does not stand in
    # for them; before, they were asked for only where a two-GPU report, or none of more ranks, was given).
    two = sorted(k[2] for k, v in c.items.items() if k[0] != it.MULTI_ISSUE and v[0] == 0)
    assert two == sorted([f"{op} {cfg}: no mkbench report" for op in it.TP_OPS for cfg in ("1x2", "2x1")]
                         + [f"{op} 1x2 against PyTorch: no torch-tp report" for op in it.TP_OPS]
                         + ["ring attention 1x2: no torch-ring-attn report", "ring attention 2x1: no torch-ring-attn "
                            "report", "one-GPU engine against SDPA: no attention report"]), two
