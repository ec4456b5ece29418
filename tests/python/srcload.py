"""Loads a repository script that is not a package module (bench/*.py, tools/*.py) by path, for the CPU tests
of its pure pieces: `load("name", ROOT / "bench" / "x.py")` runs its top level, not its main() (the
script's own `if __name__ == "__main__"` guard; tools/mkrun has no suffix)."""
import importlib.machinery
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(name, path):
    # (an explicit source loader: a script without the .py suffix, e.g. tools/mkrun, has no default one)
    spec = importlib.util.spec_from_loader(name, importlib.machinery.SourceFileLoader(name, str(path)))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
