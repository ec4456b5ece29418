"""The reports' commits for tools/issue_targets.py: this tree's commit, a --commit value as a commit id, whether the
code a benchmark measures changed between two commits (a report is committed after the commit it measured, so a
commit that adds only results or documents leaves its reports current), and the commit rule on the reports judged
(judge)."""
import os
import re
import subprocess

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# What a benchmark's numbers depend on: the library, its device code, the benchmarks and the Python package, the
# build and the tools that run them; not their results, documents or tests.
CODE = ["src", "include", "device", "bench", "python", "tools", "cmake", "CMakeLists.txt",
        ":(exclude)bench/results", ":(exclude)tools/wip", ":(exclude)*.md",
        ":(exclude)tools/issue_*.py", ":(exclude)tools/git_commits.py"]  # (the judges, not the judged)


def _git(*args):
    # (ROOT's repository whatever GIT_DIR / GIT_WORK_TREE / GIT_INDEX_FILE the caller has set, as in a git hook)
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    try:
        r = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, timeout=20, env=env)
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


# How a report names the commit it measured: mkbench "abc...-dirty"; the Python benches "abc... (tracked files
# modified)", and since bench/dist_timing.py names the library's build "abc...[-dirty] (the library's build; this
# tree: def...[ (tracked files modified)])" (the tree beside the build where the two differ).
COMMIT = re.compile(r"commit ([0-9a-f]{7,40})(-dirty)?( \(tracked files modified\))?")
TREE = re.compile(r"\(the library's build; this tree: (\S+)( \(tracked files modified\))?\)")


def parse(words):
    """(hex, with uncommitted changes) of the commit that a report's words ("commit abc...") name; None: none.
    Uncommitted changes: the library's build ("-dirty") or, where the words name it, the tree the benchmark ran
    from ("this tree: ... (tracked files modified)": an edited benchmark script is not in the library's build)."""
    m = COMMIT.match(words or "")
    if not m:
        return None
    tree = TREE.match(words[m.end():].lstrip())
    return m.group(1), bool(m.group(2) or m.group(3) or (tree and tree.group(2)))


def label(cm):
    """A parsed commit as the verdicts name it: "abc..." or, with uncommitted changes, "abc...-dirty"."""
    return "no commit recorded" if cm is None else cm[0] + ("-dirty" if cm[1] else "")


def same_commit(a, b):
    """Two hex ids of one commit (the reports write 7 or 12 digits)."""
    return a.startswith(b) or b.startswith(a)


def groups(reports, commit_of):
    """[(commit label, [reports])] of the given reports, one entry per commit (7 and 12 digits of one commit
    together; with uncommitted changes, "abc...-dirty", apart from the commit itself: other code); reports that
    record no commit (commit_of: None) under None."""
    out = []  # [(label or None, (hex, dirty) or None, [reports])]
    for p in reports:
        cm = commit_of(p)
        g = next((g for g in out if (g[1] is None) == (cm is None) and (
            cm is None or same_commit(g[1][0], cm[0]) and g[1][1] == cm[1])), None)
        if g is None:
            out.append((label(cm) if cm else None, cm, [p]))
        else:
            g[2].append(p)
    return [(g[0], g[2]) for g in out]


def judge(reports, commit_of, add, head, whence, when):
    """The commit rule: every report judged ([(report, [issues it feeds])]; commit_of(report): (hex, with
    uncommitted changes) or None; when(report): its time) measured the tree under test: commit head (git HEAD or
    --commit, `whence` says which; None: git cannot say, and the newest report's commit stands in), or a commit
    whose code is head's (code_unchanged), without uncommitted changes. A report of other code, with uncommitted
    changes (its library's build or its tree: "measured abc...-dirty", code no commit holds), or that records no
    commit, is a miss under each issue it feeds (add(issue, target, where, ok, why)). Returns the warnings to print
    above the tables (also for head "any": not judged)."""
    name = lambda f: f"`{os.path.basename(f)}`"  # noqa: E731
    said = lambda f: label(commit_of(f))  # noqa: E731
    warn = []
    gs = groups([f for f, _ in reports], commit_of)
    if len(gs) > 1:
        warn.append(f"WARNING: the reports judged come from {len(gs)} commits, their numbers are of different "
                    "code: " + "; ".join(f"{g or 'no commit recorded'}: " + ", ".join(name(p) for p in ps)
                                         for g, ps in gs))
    if head == "any":
        return warn
    if head is None:
        dated = sorted((f for f, _ in reports if commit_of(f)), key=when)
        head = commit_of(dated[-1])[0] if dated else "unknown"
        whence = "the newest report's; git cannot say this tree's HEAD"
        warn.append(f"WARNING: this tree's commit is unknown (git rev-parse HEAD failed): the reports are checked "
                    f"against the newest one's commit, {head}")
    target = f"measured the tree under test (commit {head}, {whence})"
    other, same_code = [], []
    for f, issues in reports:
        cm = commit_of(f)
        ok = cm is not None and not cm[1] and same_commit(cm[0], head)
        if cm is not None and not cm[1] and not ok and code_unchanged(cm[0], head):
            ok = True
            same_code.append(f)
        if not ok:
            other.append(f)
        for issue in issues:
            add(issue, target, name(f), ok, f"measured {said(f)}")
    if other:
        warn.append(f"WARNING: {len(other)} of the {len(reports)} reports judged did not measure the tree under "
                    f"test (commit {head}, {whence}); each is a miss: " + ", ".join(
                        f"{name(f)} ({said(f)})" for f in other))
    if same_code:
        warn.append(f"note: measured earlier commits with the code of {head} (git diff of the code they measure: "
                    "none): " + ", ".join(f"{name(f)} ({said(f)})" for f in same_code))
    return warn
