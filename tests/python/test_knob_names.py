"""Every MK_* environment variable the project's scripts, Python and C++ read or set is declared in
include/mkernel/knob_list.inc (DESIGN.md section 8: each knob once, with its default and documentation). Before
2026-12-07 tools/sanitize_gpu.sh read five variables declared nowhere (SANITIZE_STEP_S, ...), which a reader of
`mkbench --print-config` could not find. CPU only: reads the tree's files."""
import glob
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

# Names that look like knobs and are not: each with why.
NOT_KNOBS = {
    "MK_OPS": "a CMake option (-DMK_OPS=...), also named in the Python package's error text",
    "MK_BUILD_TESTS": "a CMake option",
    "MK_BUILD_BENCH": "a CMake option",
    "MK_NET_BACKENDS": "a CMake option (-DMK_NET_BACKENDS=...), named in messages and comments",
    "MK_TOOL_KNOB": "knob_list.inc's macro for the tools' knobs",
    "MK_A": "a placeholder in a docstring and its test",
    "MK_B": "a placeholder in a docstring and its test",
    "MK_NAME": "a placeholder in an error message",
    "MK_NO_SUCH_KNOB": "a test's name for an undeclared knob",
    "MK_TEST_VARIABLES_LINE": "a test's variable that is set on purpose without being declared",
}


# An MK_* word in a script or Python file (read, set for a child, or named in a message), but not a CMake
# -DMK_... option (the D before it is a letter).
SCRIPT_NAME = r"(?<![-A-Za-z0-9_])(MK_[A-Z0-9_]+)"
# An MK_* variable that C++ reads or sets.
CXX_ENV = r"(?:getenv|setenv|unsetenv)\(\s*\"(MK_[A-Z0-9_]+)\""


def declared():
    with open(os.path.join(ROOT, "include", "mkernel", "knob_list.inc")) as fh:
        return set(re.findall(r"MK_(?:TOOL_)?KNOB\((MK_[A-Z0-9_]+)", fh.read()))


def files(*patterns):
    out = []
    for p in patterns:
        out += glob.glob(os.path.join(ROOT, p), recursive=True)
    return sorted(set(out))


def undeclared(paths, pattern, known):
    """{name: [files]} for every match of pattern (its first non-empty group a name) not in known."""
    found = {}
    for path in paths:
        with open(path, errors="replace") as fh:
            text = fh.read()
        for m in re.finditer(pattern, text):
            name = next(g for g in m.groups() if g)
            if name not in known and name not in NOT_KNOBS:
                found.setdefault(name, []).append(os.path.relpath(path, ROOT))
    return found


def test_every_mk_name_in_scripts_and_python_is_declared():
    paths = files("tools/*.sh", "tools/mkrun", ".ci/run", "tools/*.py", "bench/*.py", "python/mkernel/*.py",
                  "tests/python/*.py", "tests/python/gpu/*.py", "examples/**/*.py", "examples/**/*.sh")
    paths = [p for p in paths if os.path.basename(p) != os.path.basename(__file__)]
    assert len(paths) > 40, paths  # (the globs found the tree)
    found = undeclared(paths, SCRIPT_NAME, declared())
    assert not found, f"MK_* names not declared in include/mkernel/knob_list.inc: {found}"


def test_every_mk_variable_cxx_reads_or_sets_is_declared():
    paths = files("src/**/*.cpp", "src/**/*.cu", "src/**/*.hpp", "include/**/*.hpp", "include/**/*.h",
                  "device/**/*.cuh", "device/**/*.hpp", "bench/**/*.cpp", "bench/**/*.cu", "tests/**/*.cpp",
                  "tests/**/*.cu", "tests/**/*.hpp", "tests/**/*.cuh")
    assert len(paths) > 40, paths
    found = undeclared(paths, CXX_ENV, declared())
    assert not found, f"MK_* variables read or set by C++ but not declared in knob_list.inc: {found}"


def test_the_check_sees_an_undeclared_name(tmp_path):
    script = tmp_path / "s.sh"
    script.write_text('x=${MK_NOT_A_KNOB_EITHER:-1}\ncmake -DMK_OPS=none\n')
    found = undeclared([str(script)], SCRIPT_NAME, declared())
    assert list(found) == ["MK_NOT_A_KNOB_EITHER"]
