"""CPU tests of bench/attention_bench.py's SDPA baseline (the script itself needs a GPU): at GQA shapes it runs
with enable_gqa where torch's SDPA takes it (torch >= 2.5), else on K/V repeated to the query heads beforehand
(repeated_kv), and either way it computes the attention of the exact reference. Skipped, saying so, without
torch."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the benchmark's baselines are torch code)")

from srcload import ROOT, load as _load  # noqa: E402  (tests/python: pytest puts it on the path)

bench = _load("attention_bench_for_cpu_test", ROOT / "bench" / "attention_bench.py")  # main() is not run
attn_ref = bench.attn_ref


def _version():
    return tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


def test_sdpa_takes_gqa_says_whether_enable_gqa_is_there():
    assert bench.sdpa_takes_gqa() == (_version() >= (2, 5))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hkv", [2, 8])
def test_the_sdpa_baseline_computes_the_reference_with_and_without_enable_gqa(causal, hkv):
    g = torch.Generator().manual_seed(3)
    b, s, h, d = 2, 24, 8, 16
    data = [tuple(torch.randn(b, s, n, d, generator=g) for n in (h, hkv, hkv)) for _ in range(2)]
    run = bench.sdpa(torch.nn.attention.SDPBackend.MATH)
    rep = bench.repeated_kv(data, h)
    assert len(rep) == 2 * len(data) and all(t.shape == (b, s, h, d) for t in rep.values())
    for q, k, v in data:
        ref, _ = attn_ref.reference_rows(q, k, v, causal, torch.arange(s))
        got = run(q, k, v, causal, rep).transpose(1, 2)  # (the copies repeated_kv made for this entry's K/V)
        torch.testing.assert_close(got, ref.to(got.dtype), atol=1e-5, rtol=1e-5)
        if bench.sdpa_takes_gqa() or hkv == h:
            torch.testing.assert_close(run(q, k, v, causal).transpose(1, 2), got, atol=1e-5, rtol=1e-5)
        # the copies are used, not the entry's own K/V: a wrong copy shows
        wrong = {p: torch.randn(t.shape, generator=g) for p, t in rep.items()}
        assert not torch.allclose(run(q, k, v, causal, wrong).transpose(1, 2), got, atol=1e-3)
