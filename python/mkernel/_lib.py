"""Loads libmkernel.so and declares its C ABI (include/mkernel/mkernel.h).

mkernel's Python layer does not compile against Python or torch: it binds the
C ABI with ctypes, so one build serves any Python >= 3.10 and any torch.
"""
import ctypes
import operator
import os
import sys
from pathlib import Path

ABI_VERSION = 1
MAX_LOCAL_RANKS = 8


class MkernelError(RuntimeError):
    """An error reported by libmkernel (its message names what failed)."""


def outside_stacklevel():
    """The stacklevel for a warnings.warn made by this function's caller that names the first frame outside
    mkernel and torch (the user's line), however many of their frames (dispatcher, autograd) lie between."""
    f = sys._getframe(1)  # the caller: stacklevel 1
    level = 1
    while f is not None and f.f_globals.get("__name__", "").partition(".")[0] in ("mkernel", "torch"):
        f = f.f_back
        level += 1
    return level


def _candidates():
    env = os.environ.get("MK_LIBRARY")
    if env:
        yield Path(env)
    here = Path(__file__).resolve().parent
    yield here / "lib" / "libmkernel.so"                     # installed wheel
    yield here.parents[1] / "build" / "lib" / "libmkernel.so"  # in-tree after tools/build.sh


def _load():
    env = os.environ.get("MK_LIBRARY")
    if env and not Path(env).is_file():  # (a typo must not load another copy without a word)
        raise ImportError(f"mkernel: MK_LIBRARY={env} is not a file; point it at a libmkernel.so, or unset it "
                          "to use the package's own library")
    tried = []
    for path in _candidates():
        tried.append(str(path))
        if path.is_file():
            try:
                return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL), str(path)
            except OSError as e:  # (not a shared library, another architecture, a missing dependency)
                if env and path == Path(env):
                    raise ImportError(f"mkernel: MK_LIBRARY={env} could not be loaded ({e}); point MK_LIBRARY at a "
                                      "libmkernel.so, or unset it to use the package's own library") from e
                raise ImportError(f"mkernel: {path} could not be loaded ({e}); rebuild it (tools/build.sh, or "
                                  "`pip install .`), or set MK_LIBRARY to a libmkernel.so") from e
    raise ImportError(
        "mkernel: libmkernel.so not found (tried: " + ", ".join(tried) + "); run `pip install .` or "
        "tools/build.sh in the repository, or set MK_LIBRARY to the library's path")


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_ubyte * 128)]


class CommInfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in
                ("rank", "world", "node", "num_nodes", "local_rank", "local_size", "device", "uses_vmm")]


class SymmInfo(ctypes.Structure):
    _fields_ = [("local", ctypes.c_void_p), ("bytes", ctypes.c_size_t),
                ("peers", ctypes.c_void_p * MAX_LOCAL_RANKS),
                ("local_rank", ctypes.c_int), ("local_size", ctypes.c_int)]


lib, path = _load()

# The ABI version first (before the other symbols are bound): a library of another ABI that renamed or dropped
# one is said to be of another ABI, not "older than this package".
_abi = getattr(lib, "mk_abi_version", None)
if _abi is not None:
    _abi.argtypes, _abi.restype = [], ctypes.c_int
    if _abi() != ABI_VERSION:
        raise ImportError(f"mkernel: {path} has C ABI {_abi()}, this package expects {ABI_VERSION}; rebuild it "
                          "(tools/build.sh) or point MK_LIBRARY at a build of the same source")

_c = ctypes.c_void_p
_SIGNATURES = {
    "mk_abi_version": ([], ctypes.c_int),
    "mk_last_error": ([], ctypes.c_char_p),
    "mk_get_unique_id": ([ctypes.POINTER(UniqueId)], ctypes.c_int),
    "mk_comm_init": ([ctypes.POINTER(_c), ctypes.c_int, ctypes.c_int, ctypes.POINTER(UniqueId), ctypes.c_int],
                     ctypes.c_int),
    "mk_comm_init_env": ([ctypes.POINTER(_c), ctypes.c_int], ctypes.c_int),
    "mk_comm_destroy": ([_c], ctypes.c_int),
    "mk_comm_info": ([_c, ctypes.POINTER(CommInfo)], ctypes.c_int),
    "mk_comm_barrier": ([_c], ctypes.c_int),
    "mk_comm_allgather": ([_c, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p], ctypes.c_int),
    "mk_comm_check": ([_c], ctypes.c_int),
    "mk_comm_network_bytes_put": ([_c, ctypes.POINTER(ctypes.c_uint64)], ctypes.c_int),
    "mk_comm_symmetric_bytes": ([_c, ctypes.POINTER(ctypes.c_uint64)], ctypes.c_int),
    "mk_symm_alloc": ([_c, ctypes.c_size_t, ctypes.POINTER(_c)], ctypes.c_int),
    "mk_symm_info": ([_c, ctypes.POINTER(SymmInfo)], ctypes.c_int),
    "mk_symm_free": ([_c, _c], ctypes.c_int),
    "mk_print_config": ([ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int),
    "mk_net_backends": ([], ctypes.c_char_p),
    "mk_knob_int": ([ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64)], ctypes.c_int),
    "mk_knob_bool": ([ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)], ctypes.c_int),
    "mk_gpu_spin": ([ctypes.c_int64, _c], ctypes.c_int),
}
for _name, (_args, _ret) in _SIGNATURES.items():
    _fn = getattr(lib, _name, None)
    if _fn is None:
        raise ImportError(f"mkernel: {path} has no {_name}: the library is older than this package; rebuild it "
                          "(tools/build.sh) or point MK_LIBRARY at a build of the same source")
    _fn.argtypes = _args
    _fn.restype = _ret


def c_int_arg(v, name, op, lo=-(1 << 31), hi=(1 << 31) - 1):
    """`v` as a C int argument in [lo, hi]: ctypes would wrap 2**32 to 0 and take 0.5 as 0 without a word, and
    refuse a float with a bare ArgumentError."""
    try:
        i = operator.index(v) if not isinstance(v, bool) else None
    except TypeError:
        i = None
    if i is None:
        raise MkernelError(f"{op}: {name} must be an int (got {type(v).__name__} {v!r})")
    if not lo <= i <= hi:
        raise MkernelError(f"{op}: {name} must be in [{lo}, {hi}] (got {i})")
    return i


def check(rc):
    """Raises MkernelError with the library's message when rc != 0."""
    if rc != 0:
        msg = lib.mk_last_error()
        # (errors="replace": a host name cut mid-character or a localised strerror must not turn the
        # library's error into a UnicodeDecodeError)
        raise MkernelError(msg.decode(errors="replace") if msg else "mkernel: unknown error")


def knob_int(name):
    """The integer knob `name` as the library reads it (declared, with its default, in the library's knob list)."""
    v = ctypes.c_int64()
    check(lib.mk_knob_int(name.encode(), ctypes.byref(v)))
    return v.value


def knob_bool(name):
    """The bool knob `name` as the library reads it (its spellings; a bad value is an MkernelError naming it)."""
    v = ctypes.c_int()
    check(lib.mk_knob_bool(name.encode(), ctypes.byref(v)))
    return bool(v.value)
