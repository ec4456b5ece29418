"""CPU tests of tools/bench.sh's GPU probe, tools/issue_bench.sh's output folder and tools/gpu_steps.sh's bounded
steps. Each runs a copy of the script in a scratch tree whose tools/setup.sh, tools/build.sh, tools/mkrun (and for
issue_bench.sh, the benchmarks it starts) are stand-ins that record that they ran, with a stand-in nvidia-smi first
on PATH: no setup, build or GPU work happens, and the real tree is not touched."""
import os
import pathlib
import re
import shutil
import signal
import stat
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _exe(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _tree(tmp_path, script):
    """A scratch repository root holding a copy of tools/<script> and stand-ins for what it calls."""
    root = tmp_path / "repo"
    (root / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / script, root / "tools" / script)
    for name in ("setup.sh", "build.sh"):  # record that they ran, and change nothing else
        _exe(root / "tools" / name, f'echo "{name} $*" >> "$(dirname "$0")/../ran.log"\n')
    (root / "tools" / "gpu_env.sh").write_text(":\n")
    # mkrun: its arguments and the GPUs CUDA would show the ranks
    _exe(root / "tools" / "mkrun", 'echo "mkrun $* CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}" '
                                   '>> "$(dirname "$0")/../ran.log"\n')
    return root


def _smi(tmp_path, text, rc=0):
    """A bin folder with a stand-in nvidia-smi (its -L output and exit status) and a python3 without torch."""
    b = tmp_path / "bin"
    _exe(b / "nvidia-smi", f"cat <<'EOF'\n{text}\nEOF\nexit {rc}\n")
    _exe(b / "python3", "exit 1\n")  # (bench.sh: "no torch", the attention benchmarks skipped)
    return b


def _gpus(n):
    return "\n".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i:04d}aaaa-0000)" for i in range(n))


def _run(root, path, env=None, args=()):
    e = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    e.update(env or {})
    e["PATH"] = path
    r = subprocess.run(["bash", str(root / "tools" / "bench.sh"), *args], env=e, capture_output=True, text=True,
                       timeout=120)
    log = root / "ran.log"
    return r.returncode, r.stdout + r.stderr, (log.read_text() if log.exists() else "")


def _path_without(tmp_path, names, first):
    """PATH with `first` in front and none of `names` on it: the folders that hold one of them are replaced by a
    folder of links to everything else they hold."""
    dirs = [first]
    for i, d in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        if not d or not os.path.isdir(d):
            continue
        if not any(os.path.exists(os.path.join(d, n)) for n in names):
            dirs.append(d)
            continue
        farm = tmp_path / f"path{i}"
        farm.mkdir()
        for f in os.listdir(d):
            if f not in names:
                (farm / f).symlink_to(os.path.join(d, f))
        dirs.append(str(farm))
    return os.pathsep.join(str(d) for d in dirs)


def test_bench_sh_without_nvidia_smi_says_no_gpu_and_exits_2_before_setup(tmp_path):
    root = _tree(tmp_path, "bench.sh")
    b = tmp_path / "bin"
    _exe(b / "python3", "exit 1\n")
    rc, out, ran = _run(root, _path_without(tmp_path, ("nvidia-smi", "nvcc"), b))
    assert rc == 2, out
    assert "no GPU" in out and "nvidia-smi" in out
    assert ran == ""  # neither setup nor build ran
    assert not (root / "build").exists()


def test_bench_sh_with_a_driver_that_answers_no_gpu_exits_2_before_setup(tmp_path):
    root = _tree(tmp_path, "bench.sh")
    smi = _smi(tmp_path, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", rc=9)
    rc, out, ran = _run(root, f"{smi}{os.pathsep}{os.environ['PATH']}")
    assert rc == 2 and "no GPU" in out and "couldn't communicate" in out, out
    assert ran == ""


def test_bench_sh_counts_the_gpus_cuda_visible_devices_leaves(tmp_path):
    root = _tree(tmp_path, "bench.sh")
    path = f"{_smi(tmp_path, _gpus(4))}{os.pathsep}{os.environ['PATH']}"
    # None visible: no GPU, before setup.
    rc, out, ran = _run(root, path, {"CUDA_VISIBLE_DEVICES": ""})
    assert rc == 2 and "no GPU" in out and "CUDA_VISIBLE_DEVICES" in out and ran == "", out
    # Two of four: two ranks, on those two.
    rc, out, ran = _run(root, path, {"CUDA_VISIBLE_DEVICES": "3,1"}, ["--quick"])
    assert rc == 0, out
    assert ran.splitlines() == ["setup.sh ", "build.sh -DMK_BUILD_TESTS=OFF",
                                "mkrun -n 2 --timeout 3000 build/bin/mkbench --quick CUDA_VISIBLE_DEVICES=3,1"]
    # CUDA stops at the first entry that names no GPU (7 of 4), as it reads the list: one GPU (the variable is
    # passed on as it is: CUDA reads it the same way in the ranks).
    (root / "ran.log").unlink()
    rc, out, ran = _run(root, path, {"CUDA_VISIBLE_DEVICES": "2,7,1"})
    assert rc == 0 and "mkrun -n 1 " in ran, (out, ran)
    # A GPU UUID (prefix) counts as the GPU it names; one that names none ends the list.
    (root / "ran.log").unlink()
    rc, out, ran = _run(root, path, {"CUDA_VISIBLE_DEVICES": "GPU-0001aaaa,GPU-ffff,0"})
    assert rc == 0 and "mkrun -n 1 " in ran, (out, ran)
    # Three named: the first two, said.
    (root / "ran.log").unlink()
    rc, out, ran = _run(root, path, {"CUDA_VISIBLE_DEVICES": "3,0,2"})
    assert rc == 0 and ran.rstrip().endswith("mkrun -n 2 --timeout 3000 build/bin/mkbench CUDA_VISIBLE_DEVICES=3,0")
    assert "bench.sh: 3 GPUs visible; running on 2 of them (CUDA_VISIBLE_DEVICES=3,0)" in out


@pytest.mark.parametrize("n,use", [(1, 1), (2, 2), (3, 2), (4, 4), (6, 4), (8, 8), (12, 8)])
def test_bench_sh_runs_on_2_4_or_8_gpus_and_says_so_for_other_counts(tmp_path, n, use):
    root = _tree(tmp_path, "bench.sh")
    rc, out, ran = _run(root, f"{_smi(tmp_path, _gpus(n))}{os.pathsep}{os.environ['PATH']}")
    assert rc == 0, out
    mkrun = [x for x in ran.splitlines() if x.startswith("mkrun")]
    assert len(mkrun) == 1 and mkrun[0].startswith(f"mkrun -n {use} "), ran
    if use == n:
        assert mkrun[0].endswith("CUDA_VISIBLE_DEVICES=unset") and "GPUs visible; running on" not in out
    else:
        want = ",".join(str(i) for i in range(use))
        assert mkrun[0].endswith(f"CUDA_VISIBLE_DEVICES={want}")
        assert f"bench.sh: {n} GPUs visible; running on {use} of them" in out


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_bench_sh_passes_ctrl_c_on_to_the_running_benchmark(tmp_path):
    # A terminal's Ctrl-C reaches bench.sh's process group, not the benchmark's: timeout runs it in a group of its
    # own. bench.sh ignored it and went on waiting (up to the 900 s bound); now its trap passes it on, the benchmark
    # ends, and bench.sh exits 130 at once.
    root = _tree(tmp_path, "bench.sh")
    smi = _smi(tmp_path, _gpus(1))
    _exe(smi / "python3", '[ "$1" = -c ] && exit 0  # (the torch probe: this python has torch)\n'
                          f'echo $$ > {tmp_path}/bench.pid\nexec sleep 60\n')
    e = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    e["PATH"] = f"{smi}{os.pathsep}{os.environ['PATH']}"
    p = subprocess.Popen(["bash", str(root / "tools" / "bench.sh")], env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    pid_file, bench = tmp_path / "bench.pid", None
    try:
        t_end = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < t_end:
            time.sleep(0.05)
        bench = int(pid_file.read_text())
        os.killpg(p.pid, signal.SIGINT)  # (what a terminal's Ctrl-C does: bench.sh's group)
        out, _ = p.communicate(timeout=20)
        assert p.returncode == 130, out
        assert "bench.sh: SIGINT: stopping the attention benchmark" in out, out
        assert _gone(bench), "the benchmark outlived bench.sh"
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        if bench is not None and not _gone(bench, 0):
            os.kill(bench, signal.SIGKILL)


def test_bench_sh_bounds_every_timeout_with_a_kill():
    text = (ROOT / "tools" / "bench.sh").read_text()
    calls = re.findall(r"(?<![-\w])timeout\s+[^\s|;&]+", "\n".join(x for x in text.splitlines()
                                                           if not x.lstrip().startswith("#")))
    assert calls and all(c.split()[1] == "-k" for c in calls), calls
    assert "timeout -k 5 20 nvidia-smi -L" in text


def _issue_bench(tmp_path, args, ngpu=1):
    """tools/issue_bench.sh ARGS in a scratch tree: python3 records its arguments, and attention_bench.py's
    stand-in writes a report into its --out."""
    root = _tree(tmp_path, "issue_bench.sh")
    shutil.copy(ROOT / "tools" / "gpu_steps.sh", root / "tools" / "gpu_steps.sh")
    b = _smi(tmp_path, _gpus(ngpu))
    _exe(b / "python3", 'echo "python3 $*" >> ran.log\n'
                        'if [ "$1" = bench/attention_bench.py ]; then\n'
                        '  echo "| B |" > "$3/attention-20261206T000000Z.md"\n'
                        'fi\n'
                        'if [ "$1" = tools/issue_targets.py ]; then echo "targets of $2"; fi\n')
    _exe(b / "torchrun", 'echo "torchrun $* MK_RANKS_PER_NODE=${MK_RANKS_PER_NODE-unset}" >> ran.log\n')
    e = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    e["PATH"] = f"{b}{os.pathsep}{os.environ['PATH']}"
    r = subprocess.run(["bash", str(root / "tools" / "issue_bench.sh"), *args], env=e, capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    log = root / "ran.log"
    return root, r.returncode, r.stdout + r.stderr, (log.read_text() if log.exists() else "")


def test_issue_bench_writes_each_call_into_a_fresh_folder_of_its_own(tmp_path):
    root, rc, out, ran = _issue_bench(tmp_path, ["attn"])
    assert rc == 0, out
    m = re.search(r"issue_bench.sh attn: results go to (bench/results/issue-\d{8}T\d{6}Z-attn)\n", out)
    assert m, out
    d = m.group(1)
    assert f"issue_bench.sh attn: results in {d}" in out
    assert sorted(os.listdir(root / d)) == ["attention-20261206T000000Z.md", "attention.log", "targets-attn.md"]
    assert ran.splitlines() == [f"python3 bench/attention_bench.py --out {d}", f"python3 tools/issue_targets.py {d}"]
    assert (root / d / "targets-attn.md").read_text() == f"targets of {d}\n"


def test_issue_bench_keeps_an_out_given_and_says_when_it_holds_older_files(tmp_path):
    given = tmp_path / "mine"
    given.mkdir()
    (given / "attention-20261130T000000Z.md").write_text("| B |\n")
    root, rc, out, ran = _issue_bench(tmp_path, ["attn", str(given)])
    assert rc == 0, out
    assert f"results go to {given}\n" in out and "already holds files" in out
    assert f"python3 tools/issue_targets.py {given}" in ran and (given / "targets-attn.md").exists()
    assert not (root / "bench").exists()


def test_issue_bench_without_the_gpus_it_needs_makes_no_folder(tmp_path):
    root, rc, out, ran = _issue_bench(tmp_path, ["tp"], ngpu=1)
    assert rc == 2 and "needs 2 GPU(s) (have 1)" in out, out
    assert ran == "" and not (root / "bench").exists()
    root2, rc, out, ran = _issue_bench(tmp_path / "b", ["attn"], ngpu=0)
    assert rc == 2 and "needs 1 GPU(s) (have 0)" in out, out


# Issue [multi-gpu-run]'s parts, never run on a machine of 4 or 8 GPUs yet: each call runs one layout (both did not
# fit a call's 600 s), with the right rank counts and layout names.
@pytest.mark.parametrize("ngpu", [4, 8])
def test_issue_bench_multi_parts_run_one_layout_with_every_gpu(tmp_path, ngpu):
    for rpn in (ngpu // 2, ngpu):
        lay = f"{ngpu // rpn}x{rpn}"
        for part in ("multi-tests", "multi-tp", "multi-ring"):
            d = tmp_path / f"{part}-{lay}"
            root, rc, out, ran = _issue_bench(d, [part, str(d / "out"), str(rpn)], ngpu=ngpu)
            assert rc == 0, out
            lines = ran.splitlines()
            assert lines[-1] == f"python3 tools/issue_targets.py {d / 'out'}", ran
            mkrun = [x for x in lines if x.startswith("mkrun")]
            torch = [x for x in lines if x.startswith("torchrun")]
            assert all(f"-n {ngpu} " in x and f"MK_RANKS_PER_NODE={rpn} " in x for x in mkrun), ran
            assert all(f"--nproc_per_node={ngpu} " in x for x in torch), ran
            if part == "multi-tests":
                assert len(mkrun) == 1 and "build/bin/mk_dist_tests" in mkrun[0], ran
                assert [x.split()[3] for x in torch] == ["tests/python/gpu/dist_tp_check.py",
                                                         "tests/python/gpu/dist_ring_attn_check.py"], ran
                assert all(x.endswith(f"MK_RANKS_PER_NODE={rpn}") for x in torch), ran
                logs = {f"dist-{lay}.log", f"dist_tp_check-{lay}.log", f"dist_ring_attn_check-{lay}.log"}
                assert logs <= set(os.listdir(d / "out")), os.listdir(d / "out")
            elif part == "multi-tp":
                assert len(mkrun) == 1 and f"build/bin/mkbench --out {d / 'out'} ag_gemm gemm_rs gemm_ar " in mkrun[0], ran
                # PyTorch's fused ops need one node: only in the 1xG call
                assert [x.split()[3] for x in torch] == (["bench/torch_tp_bench.py"] if rpn == ngpu else []), ran
            else:
                assert mkrun == [] and len(torch) == 1 and "bench/torch_ring_attn_bench.py --quick" in torch[0], ran
                assert torch[0].endswith(f"MK_RANKS_PER_NODE={rpn}"), ran


@pytest.mark.parametrize("rpn", [None, "", "3", "abc", "2 4", "8"])
def test_issue_bench_multi_parts_refuse_a_missing_or_bad_layout_before_anything_runs(tmp_path, rpn):
    args = ["multi-tp", str(tmp_path / "out")] + ([] if rpn is None else [rpn])
    root, rc, out, ran = _issue_bench(tmp_path, args, ngpu=4)
    assert rc == 2 and "give the ranks per node, 2 or 4, as the third argument" in out, out
    assert ran == "" and not (tmp_path / "out").exists()


def test_issue_bench_multi_parts_need_4_or_8_gpus(tmp_path):
    root, rc, out, ran = _issue_bench(tmp_path, ["multi-tests", str(tmp_path / "out"), "1"], ngpu=2)
    assert rc == 2 and "needs 4 or 8 GPUs (have 2)" in out, out
    assert ran == ""


# tools/gpu_steps.sh: a step that times out leaves nothing running (timeout --foreground signals only its child).
_STEP_CHILD = """[ "$2" = ignore-term ] && trap '' TERM  # the step's command itself outlives TERM: KILLed 5 s later
(trap '' TERM; exec sleep 60) </dev/null >/dev/null 2>&1 &  # a grandchild of timeout that outlives TERM
echo $! > "$1"
exec sleep 60 </dev/null >/dev/null 2>&1
"""


def _gone(pid, wait_s=3.0):
    """True once process pid has ended (no /proc entry, or a zombie not yet reaped), polling up to wait_s."""
    t_end = time.monotonic() + wait_s
    while True:
        try:
            state = pathlib.Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return True
        if re.search(r"^State:\s+Z", state, re.M):
            return True
        if time.monotonic() > t_end:
            return False
        time.sleep(0.05)


def _steps(tmp_path, body):
    """bash: source a copy of tools/gpu_steps.sh in tmp_path, with out=tmp_path, then run body there."""
    shutil.copy(ROOT / "tools" / "gpu_steps.sh", tmp_path / "gpu_steps.sh")
    _exe(tmp_path / "child.sh", _STEP_CHILD)
    script = f'set -u\nsource ./gpu_steps.sh\nout="{tmp_path}"\n{body}\necho "fail=$fail"\n'
    e = {k: v for k, v in os.environ.items() if k != "MK_STEP_TAG"}
    r = subprocess.run(["bash", "-c", script], env=e, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
@pytest.mark.parametrize("step,end_starts,words", [
    ("step_s=1 run ./child.sh gc.pid", "=== FAILED (124): ./child.sh gc.pid -- ", "timed out at 1 s (TERM)"),
    ("step_s=1 run ./child.sh gc.pid ignore-term", "=== FAILED (137): ./child.sh gc.pid ignore-term -- ",
     "KILLed (the 1 s bound + 5 s"),
    ("logged 1 step.log ./child.sh gc.pid", "=== rc=124 in ", "timed out at 1 s (TERM)"),
], ids=["run-TERM", "run-KILL", "logged-TERM"])
def test_gpu_steps_a_step_that_times_out_leaves_no_process_behind(tmp_path, step, end_starts, words):
    bystander = subprocess.Popen(["sleep", "60"])  # started outside any step: left alone
    gc = None
    try:
        code, out = _steps(tmp_path, step)
        gc = int((tmp_path / "gc.pid").read_text())
        end = [x for x in out.splitlines() if x.startswith(("=== FAILED", "=== rc="))]
        assert len(end) == 1 and end[0].startswith(end_starts), out
        assert code == 0 and out.rstrip().endswith("fail=1"), out
        assert words in end[0] and "; killed 1 leftover process(es) of the step" in end[0], end
        if " run " in f" {step}":
            assert re.search(r" \[\d+ s\]$", end[0]), end  # the step's time still ends the line
        else:
            assert f"(log: {tmp_path}/step.log)" in end[0], end
        assert _gone(gc), f"the step's grandchild {gc} outlived the step's timeout"
        assert bystander.poll() is None  # not a process of the step
    finally:
        bystander.kill()
        bystander.wait()
        if gc is not None and not _gone(gc, 0):
            os.kill(gc, 9)


def test_gpu_steps_tags_each_step_apart_and_kills_nothing_after_a_step_that_ends(tmp_path):
    code, out = _steps(tmp_path, "run bash -c 'echo tag=$MK_STEP_TAG'\n"
                                 "logged 5 two.log bash -c 'echo tag=$MK_STEP_TAG'\n"
                                 "run bash -c 'exit 3'\n"
                                 'echo "shell=${MK_STEP_TAG-unset}"')
    assert code == 0, out
    tags = re.findall(r"^tag=(\S+)$", out, re.M) + re.findall(r"^tag=(\S+)$", (tmp_path / "two.log").read_text(),
                                                              re.M)
    assert len(tags) == 2 and len(set(tags)) == 2 and all(re.fullmatch(r"\d+\.\d+", t) for t in tags), out
    assert "shell=unset" in out  # the tag is the step's, not the shell's
    assert "=== FAILED (3): bash -c exit 3 [" in out and "leftover" not in out, out
    assert out.rstrip().endswith("fail=1")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_gpu_steps_reaps_what_a_step_that_ended_by_itself_left_and_tells_its_own_124(tmp_path):
    # A step that ends by itself leaving a background process (only a timed-out step was reaped before: the sleep
    # held the GPU into the next step), and a command's own 124 well before the bound (reported as a timeout before).
    code, out = _steps(tmp_path, "run bash -c 'sleep 60 </dev/null >/dev/null 2>&1 & echo $! > left.pid; exit 3'\n"
                                 "step_s=30 run bash -c 'exit 124'")
    left = int((tmp_path / "left.pid").read_text())
    try:
        assert code == 0 and out.rstrip().endswith("fail=1"), out
        assert re.search(r"=== FAILED \(3\): .* -- killed 1 leftover process\(es\) of the step \[\d+ s\]", out), out
        assert _gone(left), "the step's background process outlived the step"
        assert "the command's own exit status 124, before the step's 30 s bound (not the step's timeout)" in out, out
        assert "timed out at" not in out, out
    finally:
        if not _gone(left, 0):
            os.kill(left, 9)


def test_gpu_steps_refuses_a_bound_of_zero(tmp_path):
    # timeout 0 is no bound at all: every step would have run unbounded.
    shutil.copy(ROOT / "tools" / "gpu_steps.sh", tmp_path / "gpu_steps.sh")
    e = {k: v for k, v in os.environ.items() if k != "MK_STEP_TAG"}
    r = subprocess.run(["bash", "-c", "source ./gpu_steps.sh; echo sourced"], env={**e, "MK_GPU_TEST_STEP_S": "0"},
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "sourced" not in r.stdout, r.stdout + r.stderr
    assert "MK_GPU_TEST_STEP_S must be a positive whole number of seconds (got '0'" in r.stderr
    code, out = _steps(tmp_path, "step_s=0 run true")
    assert "=== FAILED: true -- not run: step_s='0' is no positive whole number of seconds" in out, out
    assert out.rstrip().endswith("fail=1"), out
