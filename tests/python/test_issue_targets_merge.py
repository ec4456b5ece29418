"""CPU tests of tools/issue_targets.py's merge of reports (it shares test_issue_targets.py's helpers): a newer
report that covers only some rows of an op (some M, some shapes) does not hide an older report's other rows; each
row counts from the newest report holding it and is judged under that report's name, the list of reports read
says which rows an older one fills in, and the commit rules judge every report that supplies a row."""
import json
import pathlib
import shutil

from test_issue_targets import REPORTS, RES, _rows_where, find, it  # noqa: F401  (tests/python is on the path)

OLD, NEW = REPORTS[0], "mkbench-20261205T000000Z-1x2_NVLink.json"  # (the old one: 794f02543ced, every M)
BEST = "never slower than the best baseline (serial, 2-stream overlap)"


def _partial(src, keep, out, commit=None, **meta):
    """src's mkbench report with the TP tables and rows keep[op] names (a set of M; None: every row) only."""
    d = json.load(open(src))
    d["tables"] = [dict(t, rows=[r for r in t["rows"] if keep[it.tp_op(t["title"])] is None
                                 or int(r[0]) in keep[it.tp_op(t["title"])]])
                   for t in d["tables"] if it.tp_op(t["title"]) in keep]
    d["meta"].update(meta)
    if commit:
        d["meta"]["commit"] = commit
    out.write_text(json.dumps(d))
    it.load_json.cache_clear()
    return out


def _failed_gemm_ar_run(folder):
    """OLD, then a newer mkbench run of gemm_ar that failed before writing its table, in folder: the failed
    report's name."""
    shutil.copy(RES / OLD, folder / OLD)
    failed = "mkbench-20261206T000000Z-1x2_NVLink.json"
    _partial(RES / OLD, {}, folder / failed, command="build/bin/mkbench --out x gemm_ar",
             failed="gemm_ar: rank 1 role Comm timed out after 5000 ms waiting on signal 3")
    return failed


def _judge(folder):
    """select()'s reports of folder, each checked as main() checks it."""
    c = it.Checks()
    files = it.select([str(folder)], True)
    for f, take in files:
        it.kind_of(f)[2](f, c, take)
    it.check_merged(files, c)
    return {pathlib.Path(f).name: take for f, take in files}, c


def test_a_newer_partial_mkbench_run_takes_the_rows_it_lacks_from_an_older_full_one(tmp_path, capsys):
    # The newer run measured AG+GEMM at M = 1024 only (faster than before: met); the older full report at the same
    # commit supplies the other M's and the other ops. Before, the newer one hid it: four "no row" misses.
    shutil.copy(RES / OLD, tmp_path / OLD)
    _partial(RES / OLD, {"AG+GEMM": {1024}}, tmp_path / NEW)
    d = json.loads((tmp_path / NEW).read_text())
    d["tables"][0]["rows"][0][d["tables"][0]["columns"].index("mkernel ms")] = "0.300"
    (tmp_path / NEW).write_text(json.dumps(d))
    it.load_json.cache_clear()
    it.main([str(tmp_path), "--commit", "794f02543ced"])
    text = capsys.readouterr().out
    assert "no row" not in text and "WARNING" not in text
    assert f"| {BEST} | AG+GEMM 1x2 (`{NEW}`) | 1 | none (met) |" in text
    assert f"| {BEST} | AG+GEMM 1x2 (`{OLD}`) | 4 | none (met) |" in text
    assert (f"| the rows merged from several reports are of one commit | AG+GEMM 1x2 (rows merged: `{NEW}` (1 rows), "
            f"`{OLD}` (4 rows)) | 1 | none (met) |") in text
    assert (f"{OLD}` (AG+GEMM, GEMM+AR, GEMM+RS; rows newer reports lack: AG+GEMM M=2048, AG+GEMM M=4096, "
            "AG+GEMM M=8192, AG+GEMM M=16384) - commit 794f02543ced, 20 rounds") in text
    assert f"{NEW}` (AG+GEMM) - commit 794f02543ced" in text
    for f in (NEW, OLD):  # both supply rows: both are judged by the commit and rounds rules
        assert f"| measured the tree under test (commit 794f02543ced, --commit 794f02543ced) | `{f}` | 1 | none" in text
        assert f"| at least 20 timed rounds (MEASURING.md) | `{f}` | 1 | none (met) |" in text
    picked, c = _judge(tmp_path)
    assert picked == {NEW: {"AG+GEMM"}, OLD: {"AG+GEMM", "GEMM+RS", "GEMM+AR"}}
    assert ("AG+GEMM", 1024) in picked[NEW].rows and ("AG+GEMM", 1024) not in picked[OLD].rows
    assert {m for op, m in picked[OLD].rows if op == "AG+GEMM"} == {2048, 4096, 8192, 16384}
    assert find(c, "5", BEST, f"AG+GEMM 1x2 (`{NEW}`)") == [1, []]
    assert find(c, "5", BEST, f"AG+GEMM 1x2 (`{OLD}`)") == [4, []]  # (its M = 1024 miss is the newer row's now)
    assert find(c, "5", BEST, f"GEMM+RS 1x2 (`{OLD}`)")[0] == 5
    assert not any(k[1] == "(benchmark report)" for k in c.items), [k for k in c.items if "benchmark" in k[1]]


def test_a_row_no_report_has_is_missed_once_under_the_newest_report(tmp_path):
    _partial(RES / OLD, {"AG+GEMM": {2048, 4096, 8192}, "GEMM+RS": None, "GEMM+AR": None}, tmp_path / OLD)
    _partial(RES / OLD, {"AG+GEMM": {1024}}, tmp_path / NEW)
    _, c = _judge(tmp_path)
    assert find(c, "5", "(benchmark report)", "AG+GEMM 1x2 (") == [1, ["M=16384: no row (a partial run?)"]]
    assert find(c, "5", "(benchmark report)", f"AG+GEMM 1x2 (`{NEW}`)")  # (under the newest's name)
    assert find(c, "5", BEST, f"AG+GEMM 1x2 (`{OLD}`)")[0] == 3
    # Without the merge (--all, or one report given) each report misses the rows it lacks, as before.
    c = it.Checks()
    it.check_mkbench(str(tmp_path / NEW), c)
    assert len(find(c, "5", "(benchmark report)", "AG+GEMM 1x2 (")[1]) == 4


def test_rows_filled_in_from_a_report_of_another_commit_are_misses(tmp_path, capsys):
    # The older report measured other code: its rows fill the grid, and the commit rules make it a miss (the tree
    # under test; rows of one op merged from two commits), naming both reports.
    _partial(RES / OLD, {"AG+GEMM": None, "GEMM+RS": None, "GEMM+AR": None}, tmp_path / OLD, commit="0123456789ab")
    _partial(RES / OLD, {"AG+GEMM": {1024}}, tmp_path / NEW)
    it.main([str(tmp_path), "--commit", "794f02543ced"])
    text = capsys.readouterr().out
    assert (f"| measured the tree under test (commit 794f02543ced, --commit 794f02543ced) | `{OLD}` | 1 | "
            "1: measured 0123456789ab |") in text
    assert (f"| the rows merged from several reports are of one commit | AG+GEMM 1x2 (rows merged: `{NEW}` (1 rows), "
            f"`{OLD}` (4 rows)) | 1 | 1: rows of 2 commits: 0123456789ab: `{OLD}` (4 rows); 794f02543ced: `{NEW}` "
            "(1 rows) |") in text
    assert "WARNING: the reports judged come from 2 commits" in text and "no row" not in text


def test_an_op_s_rows_stop_at_a_failed_run_that_was_asked_for_it(tmp_path):
    # Newest: GEMM+AR at M = 1024 only; before it a run of gemm_ar that failed without its table; the full report
    # before that supplies AG+GEMM and GEMM+RS, never GEMM+AR rows (the failure is newer than them).
    failed = _failed_gemm_ar_run(tmp_path)
    newest = "mkbench-20261207T000000Z-1x2_NVLink.json"
    _partial(RES / OLD, {"GEMM+AR": {1024}}, tmp_path / newest)
    picked, c = _judge(tmp_path)
    assert picked == {newest: {"GEMM+AR"}, failed: {"GEMM+AR"}, OLD: {"AG+GEMM", "GEMM+RS"}}
    assert not any(op == "GEMM+AR" for op, _ in picked[OLD].rows)
    assert find(c, "6", "(benchmark report)", f"GEMM+AR 1x2 (`{newest}`)")[1] == [
        f"M={m}: no row (a partial run?)" for m in (2048, 4096, 8192, 16384)]
    assert find(c, "6", "(benchmark report)", f"GEMM+AR 1x2 (`{failed}`)")[1][0].startswith("the run failed: ")
    assert not any(k[0].startswith("6") and OLD in k[2] for k in c.items)
    assert find(c, "5", BEST, f"AG+GEMM 1x2 (`{OLD}`)")[0] == 5


def test_a_newer_partial_torch_tp_report_takes_the_rows_it_lacks_from_an_older_one(tmp_path, capsys):
    old, new = "torch-tp-20261201T101627Z.md", "torch-tp-20261205T000000Z.md"
    shutil.copy(RES / old, tmp_path / old)
    (tmp_path / new).write_text(_rows_where(RES / old, lambda c: c[1] == "4096"))
    it.main([str(tmp_path), "--commit", "794f02543ced"])
    text = capsys.readouterr().out
    assert "no row" not in text
    assert (f"{old}` (AG+GEMM, GEMM+AR, GEMM+RS; rows newer reports lack: AG+GEMM 1x2 M=1024, AG+GEMM 1x2 "
            "M=2048, AG+GEMM 1x2 M=8192, AG+GEMM 1x2 M=16384, GEMM+AR 1x2 M=1024") in text
    picked, c = _judge(tmp_path)
    assert picked[new] == picked[old] == {"AG+GEMM", "GEMM+RS", "GEMM+AR"}
    for op, issue in (("AG+GEMM", "5"), ("GEMM+RS", "5"), ("GEMM+AR", "6")):
        assert find(c, issue, "PyTorch", f"{op} 1x2 (`{new}`)")[0] == 1
        assert find(c, issue, "PyTorch", f"{op} 1x2 (`{old}`)")[0] == 4
        merged = f"{op} 1x2 against PyTorch (rows merged: `{new}` (1 rows), `{old}` (4 rows))"
        assert find(c, issue, "of one commit", merged) == [1, []]
    assert not any("no row" in m for v in c.items.values() for m in v[1])


def test_a_newer_partial_attention_report_takes_the_rows_it_lacks_from_an_older_one(tmp_path):
    old, new = "attention-20261206T035322Z.md", "attention-20261207T000000Z.md"  # (old: H200, with an LSE column)
    shutil.copy(RES / old, tmp_path / old)
    (tmp_path / new).write_text(_rows_where(RES / old, lambda c: c[0] == "B" or
                                            c[:6] == ["1", "8192", "32", "32", "128", "1"]))
    picked, c = _judge(tmp_path)
    assert picked[new].rows == {("attention", (1, 8192, 32, "1"))} and len(picked[old].rows) == 31
    assert find(c, "7", "flash", f"attention, one GPU (`{new}`)")[0] == 1
    assert find(c, "7", "flash", f"attention, one GPU (`{old}`)") == [31, []]
    assert not any("no row" in m for v in c.items.values() for m in v[1])
    # (4a67764294db-dirty both: one commit, with uncommitted changes)
    assert find(c, "7", "of one commit", "attention, one GPU (rows merged: ") == [1, []]


def test_a_failed_run_that_a_newer_full_table_supersedes_is_not_read(tmp_path):
    _failed_gemm_ar_run(tmp_path)  # (not read: picked lacks it)
    newest = "mkbench-20261207T000000Z-1x2_NVLink.json"
    _partial(RES / OLD, {"GEMM+AR": None}, tmp_path / newest)
    picked, c = _judge(tmp_path)
    assert picked == {newest: {"GEMM+AR"}, OLD: {"AG+GEMM", "GEMM+RS"}}
    assert not any(k[1] == "(benchmark report)" for k in c.items)


def test_an_older_report_fills_in_rows_of_the_issue_s_grid_only(tmp_path):
    # The older report also timed M = 512 (no row of the issue's grid): the newer full report hides it whole.
    d = json.load(open(RES / OLD))
    for t in d["tables"]:
        t["rows"].insert(0, ["512"] + t["rows"][0][1:])
    (tmp_path / OLD).write_text(json.dumps(d))
    shutil.copy(RES / OLD, tmp_path / NEW)
    it.load_json.cache_clear()
    picked, c = _judge(tmp_path)
    assert list(picked) == [NEW] and find(c, "5", BEST, "AG+GEMM 1x2 (")[0] == 5
    # Alone (or as the newest) the report's own rows off the grid are judged, as before.
    c = it.Checks()
    it.check_mkbench(str(tmp_path / OLD), c)
    assert find(c, "5", BEST, "AG+GEMM 1x2 (")[0] == 6


def test_an_unreadable_newer_report_stops_the_tool_naming_it(tmp_path):
    # (loud: quietly left out, the older report's rows were judged as if it did not exist)
    import pytest
    old, new = "attention-20261201T071538Z.md", "attention-20261205T000000Z.md"
    shutil.copy(RES / old, tmp_path / old)
    (tmp_path / new).write_text(_rows_where(RES / old, lambda c: c[0] == "B" or c[0] == "1").replace("| 1 |", "| x |"))
    with pytest.raises(SystemExit, match=f"cannot read the report .*{new}"):
        _judge(tmp_path)
