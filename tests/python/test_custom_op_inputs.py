"""CPU tests (torch, no GPU): the tensor ops' custom-op bodies -- what torch.compile's code and autograd's backward
formulas call -- hand the library dense inputs that start 16-byte aligned, whatever they are given. A gradient
can be contiguous and start at an odd offset (a slice of a cat's gradient); .contiguous() alone kept such a view,
and the library's alignment check then failed the backward pass, where the user can copy nothing. The library
calls are replaced by recorders; the inputs are CPU tensors (the bodies' device checks are replaced too)."""
import pytest

from torchops import torch_ops  # noqa: E402

torch = torch_ops()  # (torch >= 2.4, or the module skips saying why)
import mkernel.tp  # noqa: E402,F401  (registers the custom ops)
import mkernel.tp_ar  # noqa: E402,F401
from mkernel import ops, tp, tp_ar  # noqa: E402


def _odd(rows, cols):
    """A contiguous bf16 [rows, cols] view that starts 6 bytes into its storage, and its values."""
    base = torch.randn(rows * cols + 3).to(torch.bfloat16)
    t = base[3:].view(rows, cols)
    assert t.is_contiguous() and not ops.aligned16(t)
    return t


def test_dense16_copies_only_what_the_library_cannot_take():
    t = torch.zeros(8, 64, dtype=torch.bfloat16)
    assert ops.dense16(t) is t
    odd = _odd(8, 64)
    d = ops.dense16(odd)
    assert d is not odd and d.is_contiguous() and ops.aligned16(d) and torch.equal(d, odd)
    strided = torch.zeros(64, 8, dtype=torch.bfloat16).t()
    d = ops.dense16(strided)
    assert d.is_contiguous() and torch.equal(d, strided)


@pytest.mark.parametrize("op", ["ag_gemm", "ag_gemm_gathered", "gemm_rs", "all_gather", "reduce_scatter",
                                "gemm_ar", "all_reduce"])
def test_the_custom_ops_hand_the_library_aligned_dense_inputs(monkeypatch, op):
    seen = []

    def check(name, *named):
        seen.extend(named)

    def run(*args, want_gathered=False, **kw):
        out = torch.empty(1, dtype=torch.bfloat16)
        return (out, torch.empty(1, dtype=torch.bfloat16)) if want_gathered else (out,) if op == "ag_gemm" else out

    for mod in (tp, tp_ar):
        monkeypatch.setattr(mod, "_check_inputs", check, raising=False)
    for mod, name in ((tp, "_ag_gemm_run"), (tp, "_gemm_rs_run"), (tp, "_all_gather_run"),
                      (tp, "_reduce_scatter_run"), (tp_ar, "_gemm_ar_run"), (tp_ar, "_all_reduce_run")):
        monkeypatch.setattr(mod, name, run)
    a, b = _odd(128, 64), _odd(256, 64)
    two = op in ("ag_gemm", "ag_gemm_gathered", "gemm_rs", "gemm_ar")
    getattr(torch.ops.mkernel, op)(*((a, b) if two else (a,)), 0)
    assert len(seen) == (2 if two else 1)
    for (name, t), given in zip(seen, (a, b)):
        assert t.is_contiguous() and ops.aligned16(t), (op, name)
        assert torch.equal(t, given), (op, name)


@pytest.mark.parametrize("op", ["gemm", "gemm_out"])
def test_the_gemm_ops_hand_the_library_aligned_dense_inputs(monkeypatch, op):
    # The GEMM's custom-op bodies took a and b as given (the only ops without dense16): code that torch.compile
    # makes may pass them other strides than the call had, which the library's row-stride check then refused.
    seen = []
    monkeypatch.setattr(ops, "_gemm_into", lambda a, b, out, ctas: seen.append((a, b)))
    a = torch.randn(64, 128).to(torch.bfloat16).t()  # [128, 64], column-major
    b = _odd(256, 64)
    if op == "gemm":
        torch.ops.mkernel.gemm(a, b, 0)
    else:
        torch.ops.mkernel.gemm_out(a, b, torch.empty(128, 256, dtype=torch.bfloat16), 0)
    (da, db), = seen
    for t, given in ((da, a), (db, b)):
        assert t.is_contiguous() and ops.aligned16(t) and torch.equal(t, given)
