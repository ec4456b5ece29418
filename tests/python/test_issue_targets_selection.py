"""CPU tests of tools/issue_targets.py's choice of reports (split from test_issue_targets.py, whose helpers
they share): a failed mkbench run is not hidden by an older full one, reports of other code are misses
(tools/git_commits.py), ring rows of several commits are said, and stamps order by time."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from test_issue_targets import REPORTS, RES, _rows_where, find, it  # noqa: F401  (tests/python is on the path)


def _section(text, issue):
    """The lines of the report's table of one issue ("## Issue 5 ..." up to the next heading)."""
    part = text.split(f"## Issue {issue} ", 1)[1]
    return part.split("\n## ", 1)[0].splitlines()


def _failed_mkbench(src, command=None, keep=()):
    """src's report as a run that failed: meta "failed", only the TP tables of the ops in keep."""
    d = json.load(open(src))
    d["meta"]["failed"] = "ag_gemm: rank 1 role Comm timed out after 5000 ms waiting on signal 3"
    if command is not None:
        d["meta"]["command"] = command
    d["tables"] = [t for t in d["tables"] if it.tp_op(t["title"]) in keep]
    return json.dumps(d)


def test_a_newer_failed_mkbench_run_is_not_hidden_by_an_older_full_one(tmp_path, capsys):
    # A run that failed in ag_gemm wrote a report without any TP table; the older full report of the same
    # configuration in the folder must not supply "met" verdicts in its place.
    for f in REPORTS:
        shutil.copy(RES / f, tmp_path / f)
    failed = "mkbench-20261205T000000Z-1x2_NVLink.json"
    (tmp_path / failed).write_text(_failed_mkbench(RES / REPORTS[0]))
    it.load_json.cache_clear()
    assert it.main([str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert REPORTS[0] not in text.split("## Issue")[0]  # not read
    for issue, ops in (("5", ("AG+GEMM", "GEMM+RS")), ("6", ("GEMM+AR",))):
        lines = _section(text, issue)
        for op in ops:
            hit = [x for x in lines if x.startswith(f"| (benchmark report) | {op} 1x2 (`{failed}`) | 1 | 1: the run "
                                                    "failed: ag_gemm: rank 1 role Comm timed out")]
            assert hit, (op, lines)
        assert not any(REPORTS[0] in x for x in lines)
    # The 2x1 report (not superseded) is still judged.
    assert "AG+GEMM 2x1 (`mkbench-20261201T101542Z-2x1_emulated_nodes.json`)" in text


def test_a_failed_run_answers_for_the_ops_it_was_asked_for_only(tmp_path):
    shutil.copy(RES / REPORTS[0], tmp_path / REPORTS[0])
    # Asked for all three, failed after AG+GEMM: newest for all three; RS and AR are misses, AG+GEMM judged.
    part = tmp_path / "mkbench-20261205T000000Z-1x2_NVLink.json"
    part.write_text(_failed_mkbench(RES / REPORTS[0], keep=("AG+GEMM",)))
    # A later run of nvlink_count only (issue_bench.sh misc) that failed: no TP op, hides nothing.
    (tmp_path / "mkbench-20261206T000000Z-1x2_NVLink.json").write_text(
        _failed_mkbench(RES / REPORTS[0], "build/bin/mkbench --out x --iters 20 nvlink_count"))
    # A later run of gemm_ar alone (its command's option values are not benchmark names) that failed.
    ar = tmp_path / "mkbench-20261207T000000Z-1x2_NVLink.json"
    ar.write_text(_failed_mkbench(RES / REPORTS[0], "build/bin/mkbench --out gemm_rs --lead-cycles 5 gemm_ar"))
    it.load_json.cache_clear()
    picked = {pathlib.Path(p).name: ops for p, ops in it.select([str(tmp_path)], True)}
    assert picked == {part.name: {"AG+GEMM", "GEMM+RS"}, ar.name: {"GEMM+AR"}}
    c = it.Checks()
    for f, ops in it.select([str(tmp_path)], True):
        it.check_mkbench(f, c, ops)
    assert find(c, "5", "best baseline", "AG+GEMM 1x2 (")[0] == 5
    assert find(c, "5", "(benchmark report)", "GEMM+RS 1x2 (")[1][0].startswith("the run failed: ")
    assert find(c, "6", "(benchmark report)", "GEMM+AR 1x2 (")[1][0].startswith("the run failed: ")
    assert not any(k[0].startswith("5") and k[1] == "(benchmark report)" and "AG+GEMM" in k[2] for k in c.items)


def test_reports_of_another_commit_than_the_tree_are_misses_and_a_mix_is_said(tmp_path, capsys, monkeypatch):
    for f in REPORTS:
        shutil.copy(RES / f, tmp_path / f)
    target = "measured the tree under test (commit 794f02543ced, --commit 794f02543ced)"
    it.main([str(tmp_path), "--commit", "794f02543ced"])
    text = capsys.readouterr().out
    # 794f025 (torch-tp, ring) is 794f02543ced; the attention report measured 1971708 with modified files.
    assert f"| {target} | `{REPORTS[0]}` | 1 | none (met) |" in _section(text, "5")
    assert f"| {target} | `torch-tp-20261201T101627Z.md` | 1 | none (met) |" in _section(text, "6")
    assert f"| {target} | `attention-20261201T071538Z.md` | 1 | 1: measured 1971708-dirty |" in _section(text, "7")
    head = text.split("## Issue")[0]
    assert "WARNING: the reports judged come from 2 commits" in head
    assert "WARNING: 1 of the 6 reports judged did not measure the tree under test" in head
    # --commit any: the tree's commit is not judged; the mix is still said.
    it.main([str(tmp_path), "--commit", "any"])
    text = capsys.readouterr().out
    assert "measured the tree under test" not in text and "WARNING: the reports judged come from 2 commits" in text
    # Without --commit: this tree's git HEAD (reports of 2026-12-01 did not measure it).
    assert it.main([str(tmp_path / REPORTS[0]), "--strict"]) == 1
    head = it.git_commits.resolve()
    assert head and len(head) == 12
    text = capsys.readouterr().out
    assert (f"| measured the tree under test (commit {head}, git HEAD) | `{REPORTS[0]}` | 1 | "
            "1: measured 794f02543ced |") in text
    # Where git cannot say (a copy without .git): the newest report's commit stands in, and that is said.
    monkeypatch.setattr(it.git_commits, "resolve", lambda rev="HEAD": None)
    it.main([str(tmp_path)])
    text = capsys.readouterr().out
    assert "this tree's commit is unknown" in text
    # (the newest report: torch-ring-attn-20261201T102203Z.md, commit 794f025)
    assert "| measured the tree under test (commit 794f025, the newest report's; git cannot say this tree's " \
           "HEAD) | `attention-20261201T071538Z.md` | 1 | 1: measured 1971708-dirty |" in text


def test_ring_rows_merged_from_reports_of_two_commits_are_a_miss(tmp_path):
    src = RES / "torch-ring-attn-20261201T101921Z.md"  # 1x2, commit 794f025
    a, b = tmp_path / "torch-ring-attn-20261205T010000Z.md", tmp_path / "torch-ring-attn-20261205T020000Z.md"
    a.write_text(_rows_where(src, lambda c: c[1] == "1"))
    b.write_text(_rows_where(src, lambda c: c[1] == "4"))
    target = "the rows merged from several reports are of one commit"
    c = it.Checks()
    it.check_ring([str(a), str(b)], c)
    assert find(c, "7", target, "ring attention 1x2") == [1, []]
    b.write_text(_rows_where(src, lambda c: c[1] == "4").replace("commit 794f025", "commit 0123abc"))
    c = it.Checks()
    it.check_ring([str(a), str(b)], c)
    missed = find(c, "7", target, "ring attention 1x2")[1]
    assert missed == [f"rows of 2 commits: 794f025: `{a.name}` (20 rows); 0123abc: `{b.name}` (20 rows)"]


def test_stamps_order_by_time_not_by_text(tmp_path):
    # 20261205T1015Z is 10:15:00, older than 20261205T101542Z; as text "1015Z" sorts after "101542Z".
    older, newer = "mkbench-20261205T1015Z-1x2_NVLink.json", "mkbench-20261205T101542Z-1x2_NVLink.json"
    for n in (older, newer):
        shutil.copy(RES / REPORTS[0], tmp_path / n)
    assert [pathlib.Path(p).name for p, _ in it.select([str(tmp_path)], True)] == [newer]
    ring = RES / "torch-ring-attn-20261201T101921Z.md"
    ro, rn = tmp_path / "torch-ring-attn-20261205T1015Z.md", tmp_path / "torch-ring-attn-20261205T101542Z.md"
    shutil.copy(ring, ro)
    shutil.copy(ring, rn)
    c = it.Checks()
    it.check_ring([str(rn), str(ro)], c)
    assert c.ring_used == {str(rn)}
    assert it.stamp_key(newer) > it.stamp_key(older) > it.stamp_key("mkbench-x.json")


def test_commit_names_resolve_and_an_unknown_one_is_refused(tmp_path, capsys):
    shutil.copy(RES / REPORTS[0], tmp_path / REPORTS[0])
    head = it.git_commits.resolve()
    it.main([str(tmp_path), "--commit", "HEAD"])
    assert f"(commit {head}, --commit HEAD)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        it.main([str(tmp_path), "--commit", "no-such-rev"])
    assert e.value.code == 2 and "--commit no-such-rev: git knows no such commit" in capsys.readouterr().err


def _git(repo, *args):
    # No GIT_* variable of the caller's (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE: set in a hook, say) reaches git:
    # with them, this test's init and commits went into the project's own repository (session 49).
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=dict(env, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                                   GIT_COMMITTER_EMAIL="t@t")).stdout.strip()


def _commit(repo, msg):
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", msg)
    return _git(repo, "rev-parse", "--short=12", "HEAD")


def test_a_report_committed_after_the_code_it_measured_is_current(tmp_path, capsys, monkeypatch):
    """A report is committed after the commit it measured: where the commits between touch no code a benchmark
    depends on (results, documents, tests), it measured the tree under test; a code change makes it a miss."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "x.cpp").write_text("int x;\n")
    _git(repo, "init", "-q")
    measured = _commit(repo, "code")
    (repo / "bench" / "results").mkdir(parents=True)
    (repo / "bench" / "results" / "r.md").write_text("numbers\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "t.py").write_text("\n")
    results_only = _commit(repo, "results and a test")
    (repo / "src" / "x.cpp").write_text("int y;\n")
    code_changed = _commit(repo, "code again")
    monkeypatch.setattr(it.git_commits, "ROOT", str(repo))
    assert it.git_commits.code_unchanged(measured, results_only) is True
    assert it.git_commits.code_unchanged(measured, code_changed) is False
    assert it.git_commits.code_unchanged("0123456789ab", code_changed) is None
    # The judge's own modules (every tools/issue_*.py, git_commits.py) are not the code judged.
    (repo / "tools").mkdir()
    for name in ("issue_targets.py", "issue_reports.py", "issue_select.py", "git_commits.py"):
        (repo / "tools" / name).write_text("# judge\n")
    judges_only = _commit(repo, "the judge")
    assert it.git_commits.code_unchanged(code_changed, judges_only) is True
    report = tmp_path / "rep" / REPORTS[0]
    report.parent.mkdir()
    report.write_text((RES / REPORTS[0]).read_text().replace("794f02543ced", measured))
    target = "measured the tree under test (commit {}, --commit {})"
    it.main([str(report.parent), "--commit", results_only])
    text = capsys.readouterr().out
    assert f"| {target.format(results_only, results_only)} | `{REPORTS[0]}` | 1 | none (met) |" in text
    assert f"note: measured earlier commits with the code of {results_only}" in text
    it.main([str(report.parent), "--commit", code_changed])
    text = capsys.readouterr().out
    assert f"| {target.format(code_changed, code_changed)} | `{REPORTS[0]}` | 1 | 1: measured {measured} |" in text
