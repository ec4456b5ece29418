"""Loads a repository script that is not a package module (bench/*.py, tools/*.py) by path, for the CPU tests
of its pure pieces: `load("name", ROOT / "bench" / "x.py")` runs its top level, not its main()."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
