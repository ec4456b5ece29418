"""CPU tests of tools/issue_targets.py after a read-only audit of it (it shares test_issue_targets.py's helpers):
a report counts only when measured on the H200 (MEASURING.md) and rows of two GPUs never share a grid; a ring
report lacking a column its config needs (a --only run) or the check of mkernel's output, and an attention report
without the LSE check, are misses; uncommitted changes (the library's or the tree's) are misses and their own
commit; issues 5-7 always need their two-GPU reports; the emulated link runs at MEASURING.md's 50 GB/s; a ring
run at --lead-cycles 0 is its own regime; the error bounds are strict."""
import json
import pathlib
import shutil

from test_issue_targets import (  # noqa: F401  (tests/python is on the path)
    ATTN, CHECK_COL, REPORTS, RES, _current_ring, _edit_rows, _mk_report, _rewrite_tables, _ring_2x2_report,
    _rows_where, find, it)
import issue_reports  # noqa: E402  (tools/, put on the path by issue_targets.py)

H100 = "NVIDIA H100 80GB HBM3"
RING12, RING21 = "torch-ring-attn-20261201T101921Z.md", "torch-ring-attn-20261201T102203Z.md"
BEST = "never slower than the best baseline"


def _names(files):
    return {pathlib.Path(f).name: take for f, take in files}


def _drop_columns(text, names):
    """A report's text without the table columns `names`."""
    def keep(h):
        return [i for i, n in enumerate(h) if n not in names]
    return _rewrite_tables(text, lambda h: [h[i] for i in keep(h)], lambda h, cs: [cs[i] for i in keep(h)])


def _keep_rows(tmp_path, text, keep):
    """_rows_where of a report's text (by way of a file no kind of report is named like)."""
    src = tmp_path / "source-report.md"
    src.write_text(text)
    return _rows_where(src, keep)


def _ring(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    c = it.Checks()
    it.check_ring([str(f)], c)
    return c


# 1. The GPU a report was measured on.

def test_every_report_kind_says_its_gpu():
    r = issue_reports
    assert r.gpu_of(str(RES / REPORTS[0])) == "NVIDIA H200"  # mkbench: meta "gpu"
    assert r.gpu_of(str(RES / "torch-tp-20261201T101627Z.md")) == "NVIDIA H200"  # "- GPU: NAME x 2 (one node)"
    assert r.gpu_of(str(RES / RING12)) == "NVIDIA H200"
    assert r.gpu_of(str(RES / "attention-20261201T071538Z.md")) == "NVIDIA H200"  # "...; NVIDIA H200; torch 2.11"
    assert r.gpu_of(str(RES / ATTN)) == "NVIDIA H200"  # "...; NVIDIA H200, driver 580.159.04; torch 2.11"
    assert r.gpu_of(str(RES / "attention-20261206T054712Z.md")) == H100
    assert r.gpu_of(str(RES / "torch-ring-attn-20261130T2236Z-2x1-emu-b1-b4.md")) is None  # (written by hand)


def test_a_report_of_another_gpu_does_not_count_and_is_noted_once(tmp_path, capsys):
    # The newest attention report kept here is an H100 run (session 55): it led every row of the one-GPU grid.
    for f in (ATTN, "attention-20261206T054712Z.md"):
        shutil.copy(RES / f, tmp_path / f)
    # An H100 mkbench run of GEMM+AR, newer than the H200's full report: it replaced the H200's GEMM+AR rows.
    shutil.copy(RES / REPORTS[0], tmp_path / REPORTS[0])
    d = json.load(open(RES / REPORTS[0]))
    d["meta"]["gpu"] = H100
    d["tables"] = [t for t in d["tables"] if it.tp_op(t["title"]) == "GEMM+AR"]
    h100 = "mkbench-20261207T000000Z-1x2_NVLink.json"
    (tmp_path / h100).write_text(json.dumps(d))
    it.load_json.cache_clear()
    picked = _names(it.select([str(tmp_path)], True))
    assert set(picked) == {ATTN, REPORTS[0]} and picked[REPORTS[0]] == {"AG+GEMM", "GEMM+RS", "GEMM+AR"}
    assert len(picked[ATTN].rows) == 32
    assert {pathlib.Path(f).name for f, _ in it.select([str(tmp_path)], False)} == {ATTN, REPORTS[0]}
    it.main([str(tmp_path), "--commit", "any"])
    text = capsys.readouterr().out
    for f in ("attention-20261206T054712Z.md", h100):
        note = (f"note: `{tmp_path / f}` was measured on {H100}: not counted (MEASURING.md counts the H200 machine "
                "only; --gpu any counts it)")
        assert text.count(note) == 1, text.split("## Issue")[0]
        assert f"(`{f}`)" not in text
    # --gpu any: they count, each GPU's rows in a grid of their own (the H200 report keeps its GEMM+AR rows).
    picked = _names(it.select([str(tmp_path)], True, "any"))
    assert set(picked) == {ATTN, "attention-20261206T054712Z.md", REPORTS[0], h100}
    assert picked[REPORTS[0]] == {"AG+GEMM", "GEMM+RS", "GEMM+AR"} and len(picked[ATTN].rows) == 32
    it.main([str(tmp_path), "--commit", "any", "--gpu", "any"])
    text = capsys.readouterr().out
    assert "not counted" not in text and f"| {BEST} (serial, 2-stream overlap) | GEMM+AR 1x2 (`{h100}`) | 5 |" in text


def test_the_reports_kept_here_are_led_by_the_h200s():
    picked = _names(it.select([str(RES)], True))
    assert ATTN in picked and "attention-20261206T054712Z.md" not in picked and len(picked[ATTN].rows) == 32
    assert "torch-ring-attn-20261130T2236Z-2x1-emu-b1-b4.md" not in picked  # (records no GPU)
    notes = it.off_gpu([str(RES)])
    # One note for each report of another GPU (the one-GPU attention reports of H100 sessions: more come as sessions
    # run there) and for the one that records no GPU; none for the H200s'.
    h100_attention = sorted(p.name for p in RES.glob("attention-*.md") if f"; {H100}," in p.read_text())
    assert "attention-20261206T054712Z.md" in h100_attention
    for name in h100_attention:
        assert sum(f"{name}` was measured on {H100}" in n for n in notes) == 1, (name, notes)
    assert sum("torch-ring-attn-20261130T2236Z-2x1-emu-b1-b4.md` does not record its GPU" in n for n in notes) == 1
    assert len(notes) == len(h100_attention) + 1, notes


def test_ring_rows_of_two_gpus_are_never_one_grid(tmp_path, capsys):
    text = _current_ring(open(RES / RING12).read())
    (tmp_path / "torch-ring-attn-20261205T000000Z.md").write_text(text)
    (tmp_path / "torch-ring-attn-20261206T000000Z.md").write_text(
        _keep_rows(tmp_path, text.replace("- GPU: NVIDIA H200 x 2", f"- GPU: {H100} x 2"), lambda c: c[1] == "1"))
    assert [pathlib.Path(f).name for f, _ in it.select([str(tmp_path)], True)] == [
        "torch-ring-attn-20261205T000000Z.md"]
    c = it.Checks()
    it.check_ring([f for f, _ in it.select([str(tmp_path)], True, "any")], c)
    assert find(c, "7", BEST, "ring attention 1x2 (`torch-ring-attn-20261205T000000Z.md`)")[0] == 40
    assert find(c, "7", BEST, f"ring attention 1x2 ({H100}) (`torch-ring-attn-20261206T000000Z.md`)")[0] == 20
    assert len(find(c, "7", "(benchmark report)", f"ring attention 1x2 ({H100})")[1]) == 20  # (its B = 4 rows)


# 2. A ring report lacking a column its config needs.

def test_a_ring_only_run_lacking_baseline_or_half_columns_is_a_miss(tmp_path):
    # bench/torch_ring_attn_bench.py --only mkernel,...: without "ring flash" (a baseline every 1x2 row needs) the
    # best baseline was the best of the others, and without "comm nccl" eta took comm mkernel alone.
    text = _drop_columns(_current_ring(open(RES / RING12).read()), ("ring flash ms", "ring flash TFLOP/s",
                                                                   "comm nccl ms"))
    c = _ring(tmp_path, "torch-ring-attn-20261205T000000Z.md", text)
    seen, missed = find(c, "7", BEST, "ring attention 1x2")
    assert seen == 40 and len(missed) == 40 and all(m.endswith(": no ring flash column: a --only run?")
                                                    for m in missed), missed[0]
    seen, missed = find(c, "7", "eta >=", "ring attention 1x2")
    assert seen == 24 and all(m.endswith(": no comm nccl column: a --only run?") for m in missed) and len(missed) == 24
    # On emulated nodes the allgather-mk baselines are the candidates: one of the two is not enough.
    text = _drop_columns(_current_ring(open(RES / RING21).read(), lambda r: "0.001"),
                         ("allgather-mk-overlap cudnn ms",))
    c = _ring(tmp_path, "torch-ring-attn-20261206T000000Z.md", text)
    missed = find(c, "7", BEST, "ring attention 2x1")[1]
    assert len(missed) == 40 and all("no allgather-mk-overlap cudnn column: a --only run?" in m for m in missed)


def test_failed_baseline_cells_are_no_candidates_and_are_listed(tmp_path):
    # B=1 Hkv=8 S_local=32768 non-causal: best allgather cudnn 54.956 ms, then ring cudnn 54.973 ms / mkernel
    # 60.146 ms (a miss); with the best cell failed, the next best counts, and the failed cell is listed.
    shape = lambda r: (r["B"], r["Hkv"], r["S_local"], r["causal"]) == ("1", "8", "32768", "no")  # noqa: E731
    text = _edit_rows(_current_ring(open(RES / RING12).read()), shape, {"allgather cudnn ms": "failed"})
    f = "torch-ring-attn-20261205T000000Z.md"
    c = _ring(tmp_path, f, text)
    row = next(m for m in find(c, "7", BEST, "ring attention 1x2")[1] if m.startswith("B=1 Hkv=8 S_local=32768 "
                                                                                      "causal=no"))
    assert row.startswith("B=1 Hkv=8 S_local=32768 causal=no: 0.9140x (best baseline 54.973 ms / mkernel 60.146 ms")
    assert row.endswith("; without a time, not candidates: allgather cudnn 'failed')"), row
    assert c.notes == [f"note: ring attention 1x2 (`{f}`): baseline cells without a time, not candidates for the "
                       "best baseline: allgather cudnn 'failed' at B=1 Hkv=8 S_local=32768 causal=no"], c.notes


# 3. No check of the output: a wrong output.

def test_a_ring_report_without_the_output_check_column_is_wrong_output(tmp_path):
    text = _drop_columns(_current_ring(open(RES / RING12).read()), (CHECK_COL,))
    c = _ring(tmp_path, "torch-ring-attn-20261205T000000Z.md", text)
    for target, n in ((BEST, 40), ("eta >=", 24)):
        seen, missed = find(c, "7", target, "ring attention 1x2")
        assert seen == n and len(missed) == n and all(
            m.endswith(": wrong output (no 'mkernel vs fp32' column: mkernel's output was not checked)")
            for m in missed), missed[0]


def test_an_attention_report_without_the_lse_column_is_a_miss(tmp_path):
    f = tmp_path / "attention-20261207T000000Z.md"
    f.write_text(_drop_columns(open(RES / ATTN).read(), ("lse err",)))
    c = it.Checks()
    it.check_attention(str(f), c)
    seen, missed = find(c, "7", "flash", "attention, one GPU")
    assert seen == 32 and len(missed) == 32
    assert missed[0] == ("B=1 S=2048 Hkv=32 causal=0: wrong LSE (no 'lse err' column: the LSE was not checked, "
                         "bound 0.001)")


# 4. Uncommitted changes.

def test_the_tree_beside_the_library_build_is_read_and_dirty_is_its_own_commit():
    gc = it.git_commits
    words = "commit 4a67764294db (the library's build; this tree: ed78e52483b5 (tracked files modified))"
    assert gc.parse(words + ", library x") == ("4a67764294db", True)
    assert gc.parse("commit 4a67764294db (the library's build; this tree: ed78e52483b5)") == ("4a67764294db", False)
    assert gc.parse("commit 4a67764294db-dirty (the library's build), library x") == ("4a67764294db", True)
    assert gc.parse("commit 7557ab9 (tracked files modified)") == ("7557ab9", True)
    assert it.provenance(str(RES / ATTN))[1] == ("commit 4a67764294db-dirty (the library's build; this tree: "
                                                 "ed78e52483b5 (tracked files modified))")
    cms = {"a": ("794f02543ced", False), "b": ("794f025", False), "c": ("794f02543ced", True)}
    assert gc.groups(["a", "b", "c"], cms.get) == [("794f02543ced", ["a", "b"]), ("794f02543ced-dirty", ["c"])]


def test_a_dirty_report_of_the_tree_under_test_is_a_miss(tmp_path, capsys):
    # mkbench's "-dirty" library, and the Python benches' tree with modified files beside a clean build.
    d, _ = _mk_report(tmp_path, REPORTS[0], REPORTS[0])
    d["meta"]["commit"] = "794f02543ced-dirty"
    (tmp_path / REPORTS[0]).write_text(json.dumps(d))
    tp = "torch-tp-20261201T101627Z.md"
    (tmp_path / tp).write_text(open(RES / tp).read().replace(
        "- commit 794f025,", "- commit 794f02543ced (the library's build; this tree: 794f02543ced (tracked files "
        "modified)),"))
    it.load_json.cache_clear()
    it.main([str(tmp_path), "--commit", "794f02543ced"])
    text = capsys.readouterr().out
    target = "measured the tree under test (commit 794f02543ced, --commit 794f02543ced)"
    assert f"| {target} | `{REPORTS[0]}` | 1 | 1: measured 794f02543ced-dirty |" in text
    assert f"| {target} | `{tp}` | 1 | 1: measured 794f02543ced-dirty |" in text
    assert "WARNING: 2 of the 2 reports judged did not measure the tree under test" in text


def test_rows_merged_from_a_dirty_and_a_clean_report_of_one_commit_are_a_miss(tmp_path):
    a, b = tmp_path / "torch-ring-attn-20261205T010000Z.md", tmp_path / "torch-ring-attn-20261205T020000Z.md"
    a.write_text(_rows_where(RES / RING12, lambda c: c[1] == "1"))
    b.write_text(_rows_where(RES / RING12, lambda c: c[1] == "4").replace("commit 794f025", "commit 794f025-dirty"))
    c = it.Checks()
    it.check_ring([str(a), str(b)], c)
    assert find(c, "7", "of one commit", "ring attention 1x2")[1] == [
        f"rows of 2 commits: 794f025: `{a.name}` (20 rows); 794f025-dirty: `{b.name}` (20 rows)"]


# 5. Issues 5-7 always need their two-GPU reports.

def test_reports_of_four_gpus_alone_still_need_the_two_gpu_reports(tmp_path, capsys):
    d, f = _mk_report(tmp_path, REPORTS[0], "mkbench-20261207T000000Z-1x4_NVLink.json")
    d["meta"]["config"] = "1x4 NVLink"
    f.write_text(json.dumps(d))
    it.load_json.cache_clear()
    it.main([str(f), "--commit", "any"])
    text = capsys.readouterr().out
    for need in ("AG+GEMM 1x2: no mkbench report", "GEMM+AR 2x1: no mkbench report",
                 "ring attention 1x2: no torch-ring-attn report", "ring attention 2x1: no torch-ring-attn report",
                 "GEMM+RS 1x2 against PyTorch: no torch-tp report", "one-GPU engine against SDPA: no attention report",
                 "AG+GEMM 2x2: no report (tools/issue_bench.sh multi-tp OUT 2)"):
        assert f"| {need} | 0 | NO REPORT |" in text, need


# 6. Run settings: the emulated link's rate, the ring's regime.

def test_an_emulated_run_at_another_rate_than_50_gb_s_is_a_miss(tmp_path):
    # The rate the transport took (mkbench's "emulated NIC") wins over an MK_EMU_GBPS the command line shows.
    d, f = _mk_report(tmp_path, REPORTS[1], "mkbench-20261205T000000Z-2x1_emulated_nodes.json")
    d["meta"]["network"] = "MK_NET=emu; emulated NIC: 25 GB/s (MK_EMU_GBPS; where the transport is emu)"
    d["meta"]["command"] += " (MK_EMU_GBPS=50)"
    f.write_text(json.dumps(d))
    it.load_json.cache_clear()
    c = it.Checks()
    it.check_mkbench(str(f), c)
    for issue, op in (("5", "AG+GEMM"), ("5", "GEMM+RS"), ("6", "GEMM+AR")):
        assert find(c, issue, "emulated link at 50 GB/s", f"{op} 2x1") == [1, ["ran at 25 GB/s (recorded)"]]
    assert any("16.8 MB / 25 GB/s" in why for _, w, row, why in c.floors if w.startswith("GEMM+AR") and row == "M=1024")
    c = it.Checks()
    it.check_mkbench(str(RES / REPORTS[1]), c)  # (no rate recorded: the knob's default, 50)
    assert find(c, "5", "emulated link at 50 GB/s", "AG+GEMM 2x1") == [1, []]
    assert not any("emulated link" in k[1] for k in _ring(tmp_path, "torch-ring-attn-20261205T000000Z.md",
                                                          open(RES / RING12).read()).items)  # (1x2: no link)
    text = open(RES / RING21).read().replace("MK_RANKS_PER_NODE=1", "MK_RANKS_PER_NODE=1, MK_EMU_GBPS=25", 1)
    c = _ring(tmp_path, "torch-ring-attn-20261206T000000Z.md", text)
    assert find(c, "7", "emulated link at 50 GB/s", "ring attention 2x1") == [1, ["ran at 25 GB/s (recorded)"]]


def test_a_ring_run_without_the_gpu_sleep_is_judged_beside_the_default_not_instead(tmp_path):
    # torch_ring_attn_bench.py --lead-cycles 0 (another power regime, as mkbench --lead-cycles and torch_tp_bench
    # --back-to-back): its rows were merged with the default's and, being newer, replaced them.
    text = _current_ring(open(RES / RING12).read())
    old, new = tmp_path / "torch-ring-attn-20261205T000000Z.md", tmp_path / "torch-ring-attn-20261206T000000Z.md"
    old.write_text(text)
    assert "GPU sleep of 2000000 cycles" in text
    new.write_text(_keep_rows(tmp_path, text.replace("GPU sleep of 2000000 cycles", "GPU sleep of 0 cycles"),
                              lambda c: c[1] == "1"))
    assert it.config_key(str(new)) == "1x2 no-lead" and it.config_key(str(old)) == "1x2"
    c = it.Checks()
    it.check_ring([str(old), str(new)], c)
    assert find(c, "7", BEST, f"ring attention 1x2 (`{old.name}`)")[0] == 40
    assert find(c, "7", BEST, f"ring attention 1x2 no-lead (`{new.name}`)")[0] == 20
    assert len(find(c, "7", "(benchmark report)", "ring attention 1x2 no-lead")[1]) == 20  # (its own grid)
    assert not any("of one commit" in k[1] for k in c.items)  # (no grid merged from the two)


# 7. The bounds are strict (the issue: relative error < 1e-2 on O, < 1e-3 on LSE).

def test_an_error_at_the_bound_is_a_miss(tmp_path):
    shape = lambda r: (r["B"], r["S"], r["Hkv"], r["causal"]) in (("1", "4096", "8", "0"),)  # noqa: E731
    lse = lambda r: (r["B"], r["S"], r["Hkv"], r["causal"]) in (("1", "8192", "8", "1"),)  # noqa: E731
    f = tmp_path / "attention-20261207T000000Z.md"
    f.write_text(_edit_rows(_edit_rows(open(RES / ATTN).read(), shape, {"err": "1.00e-02"}), lse,
                            {"lse err": "1.00e-03"}))
    c = it.Checks()
    it.check_attention(str(f), c)
    assert find(c, "7", "flash", "attention, one GPU")[1] == [
        "B=1 S=4096 Hkv=8 causal=0: wrong output (err '1.00e-02', bound 0.01)",
        "B=1 S=8192 Hkv=8 causal=1: wrong LSE (lse err '1.00e-03', bound 0.001)"]
    at = {("1", "32", "8192", "yes"): "1.00e-02 / 2.0e-05", ("4", "8", "4096", "no"): "3.0e-03 / 1.00e-03"}
    c = _ring(tmp_path, "torch-ring-attn-20261205T000000Z.md", _current_ring(
        open(RES / RING12).read(), check=lambda r: at.get((r["B"], r["Hkv"], r["S_local"], r["causal"]),
                                                          "3.1e-03 / 2.0e-05")))
    wrong = sorted(m.split(":")[0] for m in find(c, "7", BEST, "ring attention 1x2")[1] if "wrong output" in m)
    assert wrong == ["B=1 Hkv=32 S_local=8192 causal=yes", "B=4 Hkv=8 S_local=4096 causal=no"]


def test_a_multi_gpu_run_in_another_regime_is_seen_but_does_not_stand_in_for_the_layout(tmp_path):
    # A 2x2 ring run without the GPU sleep (" no-lead"): its world (4) is read past the regime's suffix, so issue 9's
    # layouts are asked for, and it does not count as the default regime's 2x2 ring report (before: its world was
    # read as "no-lead", and a prefix match took it for the layout).
    import re
    f = _ring_2x2_report(tmp_path, lambda text: re.sub(r"GPU sleep of \d+ cycles", "GPU sleep of 0 cycles", text))
    c = it.Checks()
    it.check_ring([str(f)], c)
    it.need_absent(c)
    needs = sorted(k[2] for k, v in c.items.items() if k[0] == it.MULTI_ISSUE and v[0] == 0 and "ring" in k[2])
    assert needs == ["ring attention 1x4: no report (tools/issue_bench.sh multi-ring OUT 4)",
                     "ring attention 2x2: no report (tools/issue_bench.sh multi-ring OUT 2)"], needs
