"""CPU test of bench/torch_tp_bench.py's report (the script itself needs torchrun and GPUs): written after every
shape, so that a shape that fails -- a failed check, an exception -- leaves the rows measured before it, its own
row as 'failed' (a miss for tools/issue_targets.py) and why, and the run still fails. Skipped, saying so,
without torch or libmkernel.so (the bench imports mkernel)."""
import types

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the benchmark is torch code)")
pytest.importorskip("mkernel._lib", reason="libmkernel.so not found (the benchmark imports mkernel)")

from srcload import ROOT, load as _load  # noqa: E402  (tests/python: pytest puts it on the path)


bench = _load("torch_tp_bench", ROOT / "bench" / "torch_tp_bench.py")  # main() is not run
it = _load("issue_targets", ROOT / "tools" / "issue_targets.py")


def test_a_failed_check_keeps_the_rows_before_it_and_fails_the_run(tmp_path, monkeypatch):
    args = types.SimpleNamespace(quick=False, ops="ag,rs", out=str(tmp_path), rounds=1, warmup=0, lead_cycles=0,
                                back_to_back=False)
    reports = []  # the report's text at each write

    def run_shape(op, m, *a):
        if op == "GEMM+RS" and m == 4096:  # check() raises this on every rank
            raise RuntimeError("GEMM+RS M=4096: outputs disagree with serial (worst rank shown): mkernel: ...")
        return ({"serial": 1.0, "torch fused": 1.1, "mkernel": 0.9}, {},
                {"torch fused": [1.1, 1.0, 1.2], "mkernel": [1.0, 1.0, 1.0]})

    def write_report(*a, **k):
        write(*a, **k)
        reports.append(next(tmp_path.glob("torch-tp-*.md")).read_text())
    write = bench.write_report
    for obj, name, value in (
            (bench, "run_shape", run_shape), (bench, "write_report", write_report),
            (bench, "load_symm_mem", lambda: (object(), None)), (bench, "agree", lambda flag: flag),
            (bench, "provenance", lambda: "test"), (bench, "sh", lambda *a: None),
            (bench.torch.cuda, "get_device_properties", lambda device=None: types.SimpleNamespace(L2_cache_size=1)),
            (bench.torch.cuda, "get_device_name", lambda: "GPU"),
            (bench.torch, "Generator", lambda device=None: types.SimpleNamespace(manual_seed=lambda s: None)),
            (bench.dist, "group", types.SimpleNamespace(WORLD=types.SimpleNamespace(group_name="0"))),
            (bench, "num_hosts", lambda: 1),
            (bench.mkernel.torchrun, "main", lambda run, backend: run(types.SimpleNamespace(
                world=2, info=lambda: {"num_nodes": 1, "local_size": 2}), 0, 2))):
        monkeypatch.setattr(obj, name, value)
    monkeypatch.setenv("MK_RANKS_PER_NODE", "0")  # (its declared default: the label divided by it, read itself)
    with pytest.raises(RuntimeError, match="outputs disagree"):
        bench.main(args)
    assert len(list(tmp_path.glob("torch-tp-*"))) == 1  # one file, rewritten (no .part left)
    assert len(reports) == 5 + 2 + 1  # after each shape, and once more with the failure
    assert "| 1x2 | 1024 | 1.000 | 1.100 | 0.900 |" in reports[0]
    mk_line = next(ln for ln in reports[0].splitlines() if "MK_* set: " in ln)  # every MK_* variable set
    assert "MK_RANKS_PER_NODE=0" in mk_line.split("MK_* set: ")[1]
    assert "| 1.0000 / 1.1000 / 1.2000 |" in reports[0]  # torch fused / mkernel per round: p10 / median / p90
    text = reports[-1]
    assert "| 1x2 | 4096 | failed | failed | failed | failed | failed | failed | failed |" in text
    assert "- GEMM+RS M=4096: RuntimeError: GEMM+RS M=4096: outputs disagree" in text
    # tools/issue_targets.py: the failed row and the M's never run are misses; the rows before it count.
    c = it.Checks()
    it.check_torch_tp(str(next(tmp_path.glob("torch-tp-*.md"))), c)
    seen, missed = next(v for k, v in c.items.items() if k[2].startswith("GEMM+RS 1x2"))
    assert seen == 5 and [m.split(":")[0] for m in missed] == ["M=4096", "M=8192", "M=16384"]
    assert next(v for k, v in c.items.items() if k[2].startswith("AG+GEMM 1x2")) == [5, []]


def test_a_miss_says_its_per_round_range(tmp_path):
    # A row where mkernel is 1% slower than PyTorch's fused op by medians, but as fast in a tenth of the rounds:
    # still a miss (the ratio of medians), said to be within the run's spread.
    row = bench.fmt_row("1x2", "AG+GEMM", 1024, {"serial": 1.0, "torch fused": 0.99, "mkernel": 1.0}, {},
                        {"torch fused": [0.97, 0.99, 1.01], "mkernel": [1.0, 1.0, 1.0]})
    f = tmp_path / "torch-tp-20261205T000000Z.md"
    f.write_text("# t\n\n## AG+GEMM\n\n" + bench.header("AG+GEMM") + "\n" + row + "\n")
    c = it.Checks()
    it.check_torch_tp(str(f), c)
    seen, missed = next(v for k, v in c.items.items() if k[2].startswith("AG+GEMM 1x2"))
    assert missed[0] == ("M=1024: 0.9900x (torch 0.990 ms / mkernel 1.000 ms; per round p10/median/p90 "
                         "0.9700/0.9900/1.0100, within the run's spread)")


@pytest.mark.parametrize("nodes,local,hosts,label", [(1, 2, 1, "1x2"), (2, 1, 1, "2x1 emu (mkernel)"),
                                                     (2, 4, 2, "2x4"), (4, 2, 2, "4x2 emu (mkernel)")])
def test_the_config_label_comes_from_the_communicator(nodes, local, hosts, label):
    # The label read MK_RANKS_PER_NODE itself: "0" (its declared default) divided by zero, and a real run across
    # two nodes without it was labelled 1xW. Now: mkernel's nodes x ranks per node (comm.info()), emulated where
    # they outnumber the job's hosts.
    assert bench.config_label({"num_nodes": nodes, "local_size": local}, hosts) == (label, "emu" in label)


def test_the_check_after_the_timing_sees_a_call_after_the_first(monkeypatch):
    # Every variant runs once more after the timing, on fresh input, outputs poisoned, each call after the barrier
    # the timing used: a variant right on its first call but stale from the second on fails the run.
    monkeypatch.setattr(bench.torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(bench, "max_over_ranks", lambda v: list(v))
    w = torch.randn(8, 16)
    out_s, out_m = torch.empty(4, 8), torch.empty(4, 8)
    first = {}

    def serial(x):
        return torch.matmul(x, w.t(), out=out_s)

    def stale(x):  # the first input's result, whatever the input
        first.setdefault("x", x.clone())
        return torch.matmul(first["x"], w.t(), out=out_m)
    log = []
    fns = {"serial": serial, "mkernel": stale}
    stale(torch.randn(4, 16))  # (the check before the timing: its first call, right)
    with pytest.raises(RuntimeError, match="GEMM\\+RS M=4: outputs disagree with serial .*mkernel"):
        bench.check_after("GEMM+RS", 4, fns, torch.randn(4, 16), (out_s, out_m), lambda: log.append("barrier"))
    assert log == ["barrier", "barrier"]
    fns["mkernel"] = lambda x: torch.matmul(x, w.t(), out=out_m)
    bench.check_after("GEMM+RS", 4, fns, torch.randn(4, 16), (out_s, out_m), lambda: None)
    # Outputs are poisoned first: a variant that writes nothing reads as NaN.
    fns["mkernel"] = lambda x: out_m
    with pytest.raises(RuntimeError, match="mkernel: max\\|err\\| = inf"):
        bench.check_after("GEMM+RS", 4, fns, torch.randn(4, 16), (out_s, out_m), lambda: None)


def test_mk_environment_names_every_mk_variable_set():
    dt = __import__("sys").modules["dist_timing"]
    assert dt.mk_environment({"MK_B": "2", "PATH": "/bin", "MK_A": "x"}) == "MK_A=x, MK_B=2"
    assert dt.mk_environment({"NCCL_NVLS_ENABLE": "0"}) == "none"
