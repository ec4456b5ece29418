#!/usr/bin/env bash
# The Python the tests run (tools/test.sh calls this after tools/setup.sh):
# .venv-test beside the repository, a venv that sees the system's packages
# (torch where the system has one), with what the tests need and the system
# lacks installed into it (pytest, pyflakes, NVIDIA's cuobjdump / nvdisasm
# wheels where the CUDA toolkit has none), plus the pinned torch from PyPI
# where no torch imports there. Nothing goes into the system's Python (PEP 668). With torch, the CPU tests of
# the torch ops run here too: argument checks before any collective, the
# fake implementations and shapes torch.compile traces, autograd wiring,
# dispatcher modes (FakeTensorMode, make_fx), the benchmark helpers. Without
# it they skip, saying so.
#   MK_TEST_TORCH=0   no torch install (~70 s and ~4.7 GB with its CUDA wheels, ~7.3 GB while installing: with less
#                     than ~8.5 GB free it installs none either, saying so): a torch 2.4 or later already there (the
#                     system's, or .venv-test's from an earlier run) is used, else those tests skip
# Prints the interpreter's path last; tests/CMakeLists.txt runs pytest with it.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "[setup-test-python] $*" >&2; }
torch_pin="torch==2.11.0"   # the GPU machine's version (CUDA 13.0 wheels on PyPI)
# (torch warns at import without numpy; the benches' helpers use it through torch). 2.4 needs Python >= 3.11, 2.2
# is the last for 3.10 (pyproject: >= 3.10).
numpy_pin="numpy==2.4.6; python_version >= '3.11'"
numpy_pin_310="numpy==2.2.6; python_version < '3.11'"
venv=.venv-test
case "${MK_TEST_TORCH:-1}" in 0|1) ;; *) log "error: MK_TEST_TORCH must be 0 or 1 (got '$MK_TEST_TORCH')"; exit 1;; esac
# venv_usable: the venv's Python and pip run, and no torch install in it stopped part-way. One that did (ENOSPC,
# Ctrl-C) leaves gigabytes of CUDA wheels (pip installs them before torch), or a torch whose libraries never
# landed: `import torch` then raises OSError, which pytest.importorskip does not take for "skip", so the tests
# would error, not skip. $torch_mark exists while pip installs torch.
torch_mark=$venv/.torch-install-unfinished
venv_torch=  # the version of the venv's own torch, where venv_usable imported it (not imported twice)
venv_usable() {
  [ -e "$venv" ] || return 1
  if ! "$venv/bin/python3" -m pip --version >/dev/null 2>&1; then
    log "$venv's Python or pip does not run (an earlier run stopped part-way?): making $venv again"
    return 1
  fi
  if [ -e "$torch_mark" ]; then
    log "$venv holds a torch install that did not finish (an earlier run stopped in pip?): making $venv again"
    return 1
  fi
  if compgen -G "$venv/lib/python3*/site-packages/torch" >/dev/null &&
     ! venv_torch=$("$venv/bin/python3" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
    log "$venv holds a torch that does not import: making $venv again"
    return 1
  fi
}
if ! venv_usable; then
  rm -rf "$venv"
  log "creating $venv (python3 -m venv --system-site-packages)"
  python3 -m venv --system-site-packages "$venv" >&2
fi
py="$PWD/$venv/bin/python3"
# Where python3 is itself a venv (the GPU machine's is /opt/torch/.venv, holding torch and pytest, on a machine
# with no PyPI), a venv made from it with --system-site-packages sees the base interpreter's packages, not
# python3's: pip would then have to install pytest (offline: fails) and torch again. A .pth file in $venv adds
# python3's site-packages after $venv's own, so $venv imports what python3 imports; its own installs still win.
# Added with site.addsitedir, not as plain lines: the .pth files in them (editable installs, paths a venv borrows)
# then count too, as they do for python3.
outer_pth="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/mk-outer-venv.pth"
outer_sites=$(python3 -c 'import site, sys
if sys.prefix != sys.base_prefix:
    for d in site.getsitepackages(): print(f"import site; site.addsitedir({d!r})")')
if [ -n "$outer_sites" ]; then
  printf '%s\n' "$outer_sites" > "$outer_pth"
  log "python3 is a venv ($(dirname "$(dirname "$(command -v python3)")")): $venv sees its packages too" \
      "($outer_pth)"
else
  rm -f "$outer_pth"
fi
# pip_install WHAT WHY PACKAGE...: pip install into the venv; on failure (pip's own error above), say what failed,
# the likely causes, and what to do, as the torch install does.
pip_install() {
  if ! "$py" -m pip install -q "${@:3}" >&2; then
    log "error: pip could not install $1 into $venv ($2): see pip's error above. Is this machine offline (no" \
        "PyPI), or its disk full ($(df -Ph "$venv" | awk 'NR == 2 {print $4}') free)? Install it into $venv from" \
        "a local wheel ($py -m pip install FILE.whl), or rerun where PyPI is reachable"
    exit 1
  fi
}
"$py" -c 'import pytest' 2>/dev/null || pip_install pytest "the Python tests run under it" pytest
# pyflakes for tools/check_python_names.sh (names used but never defined, found before a line runs).
# A lint, not a test of the library: where pip cannot get it (no PyPI), a warning, and that check skips (77).
if ! "$py" -m pyflakes --version >/dev/null 2>&1 &&
   ! "$py" -m pip install -q 'pyflakes==3.2.0' >&2; then
  log "warning: pip could not install pyflakes into $venv (its error above; no PyPI here?): the ctest entry" \
      "python.undefined_names (tools/check_python_names.sh) will be SKIPPED; rerun where PyPI is reachable"
fi
# cuobjdump + nvdisasm for tools/check_uniform_loop.py (a CPU test reads the ring kernel's SASS), where the
# CUDA toolkit lacks them: NVIDIA's wheels (pinned; ~5 MB; any 13.x reads this nvcc's sm_90a code).
if ! { [ -x /usr/local/cuda/bin/cuobjdump ] && [ -x /usr/local/cuda/bin/nvdisasm ]; } &&
   ! "$py" -c 'import os, sys
sys.exit(not any(os.path.exists(os.path.join(p, "nvidia/cu13/bin/nvdisasm")) for p in sys.path))' 2>/dev/null; then
  log "installing cuobjdump and nvdisasm (PyPI: nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)"
  pip_install "cuobjdump and nvdisasm" "tools/check_uniform_loop.py needs them" \
    'nvidia-cuda-cuobjdump==13.2.51' 'nvidia-cuda-nvdisasm==13.2.51'
fi
# torch_room: whether the disk holds the torch install (prints what it found either way; exit 1: it does not).
# torch 2.11 with its CUDA 13 wheels: ~3 GB downloaded into pip's temporary folder, ~4.7 GB unpacked into the venv,
# both at once before pip removes the download: 7.3 GB more in use at the peak, 4.7 GB after (measured on the CPU
# machine, 2026-12-06, with --no-cache-dir). The need below leaves ~1 GB for the build beside it.
torch_need_mb=8500
torch_room() {
  "$py" - "$venv" "$torch_need_mb" <<'PYEOF'
import os, sys, tempfile
venv, need = sys.argv[1], int(sys.argv[2])
tmp = tempfile.gettempdir()  # where pip downloads to (TMPDIR, else /tmp, ...)
def free_mb(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize // 2**20
v, t = free_mb(venv), free_mb(tmp)
if os.stat(venv).st_dev == os.stat(tmp).st_dev:
    print(f"{v} MB free on the file system of {venv} and of pip's temporary folder {tmp}; it needs ~{need} MB")
    sys.exit(v < need)
nv, nt = need * 6 // 10, need * 4 // 10
print(f"{v} MB free for {venv} and {t} MB for pip's temporary folder {tmp}; it needs ~{nv} and ~{nt} MB")
sys.exit(v < nv or t < nt)
PYEOF
}
# torch_new_enough VERSION: whether it has what mkernel's tensor ops need (torch.library.custom_op: 2.4 on).
torch_new_enough() { [ "$(printf '%s\n2.4\n' "${1%%+*}" | sort -V | head -1)" = "2.4" ]; }
sys_torch=
[ -n "$venv_torch" ] || sys_torch=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
if [ -n "$venv_torch" ]; then
  log "torch $venv_torch found"
elif [ -n "$sys_torch" ] && torch_new_enough "$sys_torch"; then
  log "torch $sys_torch found"
elif [ -n "$sys_torch" ] && [ "${MK_TEST_TORCH:-1}" = "0" ]; then
  log "MK_TEST_TORCH=0: torch $sys_torch (older than the 2.4 mkernel's tensor ops need) is not replaced; the" \
      "Python tests that need those ops will skip, saying so"
elif [ "${MK_TEST_TORCH:-1}" = "0" ]; then
  log "MK_TEST_TORCH=0: no torch; the Python tests that need it will skip"
elif ! room=$(torch_room); then
  # Not enough disk for the CUDA wheels: the tests run without torch, as MK_TEST_TORCH=0 would, saying so; pip
  # would fail part-way (ENOSPC) and leave a torch that does not import.
  log "NOT installing $torch_pin: $room. The Python tests that need torch will SKIP, saying so; free the space" \
      "and rerun, or set MK_TEST_TORCH=0 to say this is meant"
else
  [ -z "$sys_torch" ] || log "torch $sys_torch found, older than the 2.4 mkernel's tensor ops need: $venv gets its own"
  log "installing $torch_pin into $venv (PyPI, no pip cache; $room; MK_TEST_TORCH=0 skips this)"
  touch "$torch_mark"
  if ! "$py" -m pip install -q --no-cache-dir "$torch_pin" "$numpy_pin" "$numpy_pin_310" >&2; then
    log "error: pip could not install $torch_pin into $venv ($(torch_room || true)); rerun with" \
        "MK_TEST_TORCH=0 to test without torch ($venv is removed: what pip put there would not import)"
    rm -rf "$venv"
    exit 1
  fi
  # (the venv's own: it comes before the system's, which may hold an older one)
  if ! err=$("$py" -c 'import sys, torch; v = torch.__version__.split("+")[0]
sys.exit(0 if v == sys.argv[1] else f"the torch that imports is {torch.__version__}")' "${torch_pin#torch==}" \
       2>&1); then
    log "error: $torch_pin installed into $venv, but it does not import as that: ${err##*$'\n'}; rerun with" \
        "MK_TEST_TORCH=0 to test without torch ($venv is removed)"
    rm -rf "$venv"
    exit 1
  fi
  rm -f "$torch_mark"
fi
echo "$py"
