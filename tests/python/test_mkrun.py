"""tools/mkrun on the CPU: a failed rank stops the others, --timeout names the ranks still running, a rank that
ignores SIGTERM is killed, and a rank that outlives SIGKILL is named and left behind rather than waited for."""
import os
import subprocess
import sys
import time

from srcload import ROOT, load

MKRUN = ROOT / "tools" / "mkrun"


def run(*args, timeout=60):
    t0 = time.time()
    r = subprocess.run([sys.executable, str(MKRUN), *args], capture_output=True, text=True, timeout=timeout)
    return r, time.time() - t0


def test_a_failed_rank_stops_the_others_and_is_named():
    r, took = run("-n", "3", "--", sys.executable, "-c",
                  "import os, sys, time; sys.exit(5) if os.environ['RANK'] == '2' else time.sleep(60)")
    assert r.returncode == 5, r.stderr
    assert "rank 2 exited with code 5; stopping the other ranks" in r.stderr
    assert took < 30


def test_timeout_names_the_running_ranks_and_kills_one_ignoring_sigterm():
    code = ("import os, signal, sys, time\n"
            "if os.environ['RANK'] == '1': signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "sys.exit(0) if os.environ['RANK'] == '0' else time.sleep(60)\n")
    r, took = run("-n", "2", "--timeout", "2", "--", sys.executable, "-c", code)
    assert r.returncode == 124, r.stderr
    assert "timed out after 2 s; ranks still running: [1]; stopping them" in r.stderr
    assert 4.5 <= took < 30, took  # 2 s, then the 3 s of grace SIGTERM got before SIGKILL ended the rank


def test_every_rank_skipped_is_a_skip():
    r, _ = run("-n", "2", "--", sys.executable, "-c", "import sys; sys.exit(77)")
    assert r.returncode == 77, r.stderr
    assert "every rank exited 77 (skipped): [0, 1]" in r.stderr


def test_a_partly_skipped_job_fails_naming_the_ranks():
    # Some ranks skipped (77) while the others ran and passed: no pass (it exited 0 without a word before).
    r, _ = run("-n", "3", "--", sys.executable, "-c",
               "import os, sys; sys.exit(77 if os.environ['RANK'] == '1' else 0)")
    assert r.returncode == 1, r.stderr
    assert "ranks [1] exited 77 (skipped) while ranks [0, 2] ran and exited 0" in r.stderr


def test_no_command_after_the_separator_is_refused():
    r, _ = run("-n", "2", "--")  # (an IndexError's traceback before)
    assert r.returncode == 2, r.stderr
    assert "no command given" in r.stderr and "Traceback" not in r.stderr


def test_bad_timeout_or_port_is_refused_before_any_rank_starts(tmp_path):
    marker = tmp_path / "started"
    code = f"open({str(marker)!r}, 'a').write('x')"
    for args, why in ((("--timeout", "-1"), "--timeout must be >= 0"), (("--timeout", "nan"), "--timeout must be"),
                      (("--port", "70000"), "--port must be a TCP port"), (("--port", "-5"), "--port must be")):
        r, _ = run("-n", "2", *args, "--", sys.executable, "-c", code)
        assert r.returncode == 2 and why in r.stderr, (args, r.stderr)
    assert not marker.exists()


class _Unkillable:
    """A process SIGKILL does not end (uninterruptible sleep): poll() stays None, wait() times out."""
    pid = 999999999  # no such process group: killpg raises ProcessLookupError, which stop() ignores

    def __init__(self):
        self.waited = []

    def poll(self):
        return None

    def wait(self, timeout=None):
        self.waited.append(timeout)
        if timeout is None:
            raise AssertionError("stop() waited without a bound")
        raise subprocess.TimeoutExpired("rank", timeout)


def test_stop_names_a_rank_that_outlives_sigkill_and_returns(capsys):
    mkrun = load("mkrun_under_test", MKRUN)
    p = _Unkillable()
    t0 = time.time()
    mkrun.stop([p], grace=0.1, reap=0.2)
    assert time.time() - t0 < 5
    assert p.waited and all(t is not None and t <= 0.2 for t in p.waited)
    assert "rank 0 (pid 999999999) did not exit 0.2 s after SIGKILL" in capsys.readouterr().err


def _gone(pid, within=10.0):
    end = time.time() + within
    while time.time() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_what_a_rank_left_running_is_stopped_whether_the_rank_failed_or_not(tmp_path):
    # A rank that starts a helper and exits: the helper holds mkrun's output pipe, so a caller reading it (as run()
    # does) waited for the helper (before 2026-12-06: 30 s here, forever for a hung one). Failed and clean alike.
    for code in (3, 0):
        pidfile = tmp_path / f"helper{code}"
        script = f"sleep 30 & echo $! > {pidfile}; exit {code}"
        r, took = run("-n", "1", "--", "sh", "-c", script)
        assert r.returncode == code, r.stderr
        assert took < 15, took
        assert _gone(int(pidfile.read_text())), f"the helper of a rank that exited {code} is still running"
