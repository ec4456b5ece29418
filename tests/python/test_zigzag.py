"""CPU tests of mkernel.zigzag_shard / zigzag_unshard / zigzag_positions (python/mkernel/zigzag.py):
round trips, positions, error messages, and the semantics they exist for: causal attention of a rank's
zigzag shard, masked by global positions, equals the full sequence's causal attention at those rows.
Pure torch; skipped, saying so, without torch. Where libmkernel.so cannot be loaded (the package's
import needs it) zigzag.py is loaded on its own from its path."""
import importlib.util
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (zigzag helpers are torch tensor ops)")

ZIGZAG_PY = pathlib.Path(__file__).resolve().parents[2] / "python" / "mkernel" / "zigzag.py"

try:
    import mkernel
    import mkernel.zigzag as zz
    VIA_PACKAGE = True
except ImportError:  # no libmkernel.so: the helpers need none
    _spec = importlib.util.spec_from_file_location("mkernel_zigzag_standalone", ZIGZAG_PY)
    zz = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(zz)
    VIA_PACKAGE = False


def full_sequence(length, shape, seed):
    """A random tensor of `shape` with `length` in place of None (the sequence dimension)."""
    g = torch.Generator().manual_seed(seed)
    dims = [length if d is None else d for d in shape]
    return torch.randn(*dims, generator=g)


@pytest.mark.skipif(not VIA_PACKAGE, reason="libmkernel.so not loadable: the package's exports are not importable")
def test_exported_lazily_from_the_package():
    for name in ("zigzag_shard", "zigzag_unshard", "zigzag_positions"):
        assert name in mkernel.__all__
        assert getattr(mkernel, name) is getattr(zz, name)
    assert zz.MkernelError is mkernel.MkernelError


def test_loads_on_its_own_without_the_library():
    # By path, outside the package: no libmkernel.so, its own MkernelError.
    code = (f"import importlib.util as u; s = u.spec_from_file_location('zz', {str(ZIGZAG_PY)!r}); "
            "m = u.module_from_spec(s); s.loader.exec_module(m); import sys; "
            "print(m.zigzag_positions(1, 2, 4).tolist(), 'mkernel._lib' in sys.modules, m.MkernelError.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[2,", "3,", "4,", "5]", "False", "MkernelError"]


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("seq_dim,shape", [(1, (2, None, 3)), (0, (None, 5)), (2, (2, 3, None, 4)),
                                           (-2, (2, 3, None, 4)), (-1, (3, None))])
def test_round_trip(world, seq_dim, shape):
    length = 2 * world * 3
    x = full_sequence(length, shape, seed=world)
    shards = [zz.zigzag_shard(x, r, world, seq_dim=seq_dim) for r in range(world)]
    d = seq_dim % x.dim()
    for s in shards:
        assert s.shape[d] == length // world and s.shape[:d] == x.shape[:d] and s.shape[d + 1:] == x.shape[d + 1:]
    assert torch.equal(zz.zigzag_unshard(shards, seq_dim=seq_dim), x)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shard_holds_chunk_r_and_its_mirror(world):
    c = 5
    x = torch.arange(2 * world * c).view(1, -1)  # entry = global position
    for r in range(world):
        s = zz.zigzag_shard(x, r, world)
        expect = list(range(r * c, (r + 1) * c)) + list(range((2 * world - 1 - r) * c, (2 * world - r) * c))
        assert s[0].tolist() == expect
        pos = zz.zigzag_positions(r, world, 2 * c)
        assert pos.dtype == torch.long and pos.tolist() == expect
        assert torch.all(pos[1:] > pos[:-1])  # local order is global order
    # Together the ranks hold every position once.
    allpos = torch.cat([zz.zigzag_positions(r, world, 2 * c) for r in range(world)])
    assert sorted(allpos.tolist()) == list(range(2 * world * c))


def test_world_2_example_from_the_docstring():
    x = torch.arange(8).view(1, 8)  # chunks [0 1] [2 3] [4 5] [6 7]
    assert zz.zigzag_shard(x, 0, 2)[0].tolist() == [0, 1, 6, 7]
    assert zz.zigzag_shard(x, 1, 2)[0].tolist() == [2, 3, 4, 5]


def test_positions_on_a_device_argument():
    assert zz.zigzag_positions(0, 2, 4, device="cpu").device.type == "cpu"


def test_shard_keeps_dtype_and_grad():
    x = torch.randn(2, 8, 3, dtype=torch.float64, requires_grad=True)
    shards = [zz.zigzag_shard(x, r, 2) for r in range(2)]
    sum(s.sum() for s in shards).backward()  # every element in exactly one shard
    assert shards[0].dtype == torch.float64 and torch.equal(x.grad, torch.ones_like(x))


@pytest.mark.parametrize("call,pattern", [
    (lambda: zz.zigzag_shard(torch.zeros(1, 10), 0, 3), r"sequence length 10 .*multiple of 2 \* world = 6"),
    (lambda: zz.zigzag_shard(torch.zeros(1, 0), 0, 1), r"sequence length 0 .*positive multiple"),
    (lambda: zz.zigzag_shard(torch.zeros(1, 8), 2, 2), r"rank 2 is outside \[0, 2\)"),
    (lambda: zz.zigzag_shard(torch.zeros(1, 8), -1, 2), r"rank -1 is outside \[0, 2\)"),
    (lambda: zz.zigzag_shard(torch.zeros(1, 8), 0, 0), r"world must be >= 1 \(got 0\)"),
    (lambda: zz.zigzag_shard(torch.zeros(1, 8), 0.5, 2), r"rank must be an integer \(got float\)"),
    (lambda: zz.zigzag_shard(torch.zeros(1, 8), 0, 2, seq_dim=2), r"seq_dim 2 is out of range for a 2-D tensor"),
    (lambda: zz.zigzag_shard([1, 2], 0, 1), r"x must be a torch.Tensor \(got list\)"),
    (lambda: zz.zigzag_unshard([]), r"non-empty list of tensors"),
    (lambda: zz.zigzag_unshard(torch.zeros(2, 4)), r"non-empty list of tensors"),
    (lambda: zz.zigzag_unshard([torch.zeros(1, 4), torch.zeros(1, 6)]), r"shards\[1\] is \(1, 6\)"),
    (lambda: zz.zigzag_unshard([torch.zeros(1, 4), torch.zeros(1, 4, dtype=torch.int32)]), r"shards\[1\] is"),
    (lambda: zz.zigzag_unshard([torch.zeros(1, 3)]), r"local sequence length 3 .*positive even"),
    (lambda: zz.zigzag_unshard([torch.zeros(1, 4), "x"]), r"shards\[1\] is a str"),
    (lambda: zz.zigzag_positions(0, 2, 7), r"s_local must be a positive even number .*got 7"),
    (lambda: zz.zigzag_positions(3, 2, 8), r"rank 3 is outside \[0, 2\)"),
])
def test_errors_name_the_problem(call, pattern):
    with pytest.raises(zz.MkernelError, match=pattern) as info:
        call()
    assert str(info.value).startswith("mkernel.zigzag_")


def causal_attention(q, k, v, q_pos, k_pos):
    """(B, S, H, D) layout; query i sees key j iff k_pos[j] <= q_pos[i]. SDPA on CPU in float32."""
    mask = k_pos[None, :] <= q_pos[:, None]
    out = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                           attn_mask=mask)
    return out.transpose(1, 2)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_causal_attention_on_zigzag_shards_matches_the_full_sequence(world):
    # The semantics: rank r's queries are its zigzag shard; the keys are everything (here as an all-gather
    # of every rank's shard would give them, in rank order); the causal mask compares global positions.
    b, c, h, d = 2, 3, 2, 8
    length = 2 * world * c
    g = torch.Generator().manual_seed(world)
    q, k, v = (torch.randn(b, length, h, d, generator=g) for _ in range(3))
    pos = torch.arange(length)
    ref = causal_attention(q, k, v, pos, pos)  # the full sequence, plain causal
    assert torch.allclose(ref, torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).transpose(1, 2), atol=1e-6)
    k_all = torch.cat([zz.zigzag_shard(k, r, world) for r in range(world)], dim=1)
    v_all = torch.cat([zz.zigzag_shard(v, r, world) for r in range(world)], dim=1)
    k_pos = torch.cat([zz.zigzag_positions(r, world, 2 * c) for r in range(world)])
    outs = []
    for r in range(world):
        q_pos = zz.zigzag_positions(r, world, 2 * c)
        out = causal_attention(zz.zigzag_shard(q, r, world), k_all, v_all, q_pos, k_pos)
        torch.testing.assert_close(out, ref[:, q_pos], atol=1e-5, rtol=1e-5)
        outs.append(out)
    torch.testing.assert_close(zz.zigzag_unshard(outs), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("world", [2, 3])
def test_local_causal_mask_is_the_global_one_restricted(world):
    # Why ring step 0 may use a plain causal mask over the local tokens: local order = global order.
    b, c, h, d = 1, 4, 2, 8
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(b, 2 * world * c, h, d, generator=g) for _ in range(3))
    for r in range(world):
        ql, kl, vl = (zz.zigzag_shard(t, r, world) for t in (q, k, v))
        pos = zz.zigzag_positions(r, world, 2 * c)
        local = torch.nn.functional.scaled_dot_product_attention(
            ql.transpose(1, 2), kl.transpose(1, 2), vl.transpose(1, 2), is_causal=True).transpose(1, 2)
        torch.testing.assert_close(local, causal_attention(ql, kl, vl, pos, pos), atol=1e-6, rtol=1e-6)
