"""Git questions tools/issue_targets.py asks about the reports' commits: this tree's commit, a --commit value as
a commit id, and whether the code a benchmark measures changed between two commits (a report is committed after
the commit it measured, so a commit that adds only results or documents leaves its reports current)."""
import os
import re
import subprocess

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# What a benchmark's numbers depend on: the library, its device code, the benchmarks and the Python package, the
# build and the tools that run them; not their results, documents or tests.
CODE = ["src", "include", "device", "bench", "python", "tools", "cmake", "CMakeLists.txt",
        ":(exclude)bench/results", ":(exclude)tools/wip", ":(exclude)*.md",
        ":(exclude)tools/issue_targets.py", ":(exclude)tools/git_commits.py"]  # (the judges, not the judged)


def _git(*args):
    try:
        r = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return r


def resolve(rev="HEAD"):
    """rev (HEAD, a branch, a tag, any spelling of an id) as the 12 hex digits the reports write; None where git
    cannot say (no such commit, or a copy of the tree without its .git)."""
    r = _git("rev-parse", "--verify", "--quiet", "--short=12", f"{rev}^{{commit}}")
    out = r.stdout.strip() if r is not None else ""
    return out if r is not None and r.returncode == 0 and re.fullmatch(r"[0-9a-f]{7,40}", out) else None


def code_unchanged(measured, head):
    """True when no file a benchmark's numbers depend on (CODE) differs between the two commits; False when one
    does; None where git cannot say (an id it does not know)."""
    r = _git("diff", "--quiet", measured, head, "--", *CODE)
    if r is None or r.returncode not in (0, 1):
        return None
    return r.returncode == 0
