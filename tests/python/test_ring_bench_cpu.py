"""CPU tests of bench/torch_ring_attn_bench.py's pure pieces (the script itself needs torchrun and GPUs):
argument parsing and shapes, flop counts, the aten result unpacking, the log-sum-exp merge against a
full softmax, and both baselines' algorithms simulated on CPU for several world sizes (the ring's
zigzag step rules, the all-gather's slot layout and prefixes) against full-sequence attention; the report's
NVLink column, and what a variant or shape that fails (out of memory) leaves, agreed over ranks, with the GPU
calls and the process group stood in for on the CPU. Skipped, saying so, without torch."""

import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the benchmark's helpers are torch code)")

from srcload import ROOT, load as _load  # noqa: E402  (tests/python: pytest puts it on the path)


bench = _load("torch_ring_attn_bench", ROOT / "bench" / "torch_ring_attn_bench.py")  # main() is not run
rb = sys.modules["ring_baselines"]  # (the baselines, as the bench imported them: one module, patched in one place)
zz = _load("mkernel_zigzag_for_bench_test", ROOT / "python" / "mkernel" / "zigzag.py")


def test_parse_args_full_and_quick():
    a = bench.parse_args([])
    assert (a.batch_list, a.kv_list, a.mask_list) == ([1, 4], [32, 8], ["causal", "full"])
    assert a.seq_list == [2048, 4096, 8192, 16384, 32768]
    assert (a.rounds, a.warmup, a.out) == (20, 3, "bench/results")
    shapes = bench.shapes(a)
    assert len(shapes) == 2 * 2 * 2 * 5 and len(set(shapes)) == len(shapes)
    assert all(s.h == 32 and s.d == 128 for s in shapes)
    q = bench.parse_args(["--quick", "--out", "/tmp/x", "--rounds", "5"])
    assert {(s.b, s.s) for s in bench.shapes(q)} == {(1, 8192)} and len(bench.shapes(q)) == 4
    assert (q.out, q.rounds) == ("/tmp/x", 5)


@pytest.mark.parametrize("argv", [["--seqs", "1023"], ["--kv-heads", "5"], ["--masks", "sliding"]])
def test_parse_args_rejects(argv, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(argv)
    assert "error" in capsys.readouterr().err


def test_attention_flops():
    full = bench.Shape(b=4, hkv=8, s=8192, causal=False)
    assert bench.attn_flops(full, 2) == 4 * 4 * 32 * 8192 * 16384 * 128
    assert bench.attn_flops(bench.Shape(4, 8, 8192, True), 2) == bench.attn_flops(full, 2) // 2
    assert bench.attn_flops(bench.Shape(1, 32, 2048, False), 1) == 4 * 32 * 2048 * 2048 * 128  # KV heads don't count


def test_split_out_lse_accepts_both_aten_layouts_and_rejects_others():
    b, s, h, d = 2, 5, 3, 4
    out = torch.randn(b, h, s, d)
    for lse in (torch.randn(b, h, s), torch.randn(b, h, s, 1), torch.randn(b, h, s + 3)):  # flash, cuDNN, padded
        o, l = rb.split_out_lse((out, lse, None), b, s, h, d)
        assert o.shape == (b, s, h, d) and torch.equal(o, out.transpose(1, 2))
        assert l.shape == (b, h, s) and torch.equal(l, lse.reshape(b, h, -1)[..., :s])
    with pytest.raises(RuntimeError, match="attention output is"):
        rb.split_out_lse((out.transpose(1, 2), torch.randn(b, h, s)), b, s, h, d)
    with pytest.raises(RuntimeError, match="logsumexp is"):
        rb.split_out_lse((out, torch.randn(b, h, s, dtype=torch.float64)), b, s, h, d)
    with pytest.raises(RuntimeError, match="logsumexp is"):
        rb.split_out_lse((out, torch.randn(b, s, h)), b, s, h, d)


def block_attention(q, k, v, causal):
    """Reference (out, lse) of one block, (B, S, heads, D) layout; causal only square (as the bench uses it)."""
    assert not causal or q.shape[1] == k.shape[1]
    return bench.reference_rows(q, k, v, causal, torch.arange(q.shape[1]))


def test_reference_rows_matches_sdpa():
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(2, 12, 4, 16, generator=g), torch.randn(2, 12, 2, 16, generator=g), \
        torch.randn(2, 12, 2, 16, generator=g)
    rows = torch.tensor([0, 3, 11, 5])
    for causal in (False, True):
        out, lse = bench.reference_rows(q, k, v, causal, rows)
        kr, vr = (t.repeat_interleave(2, dim=2) for t in (k, v))  # (SDPA's GQA mapping; enable_gqa needs torch 2.5)
        sd = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), kr.transpose(1, 2), vr.transpose(1, 2), is_causal=causal).transpose(1, 2)
        torch.testing.assert_close(out, sd[:, rows], atol=1e-5, rtol=1e-5)
        assert lse.shape == (2, 4, 4)


def test_merge_equals_one_softmax_over_all_keys():
    g = torch.Generator().manual_seed(2)
    b, s, h, d = 2, 6, 3, 8
    q = torch.randn(b, s, h, d, generator=g)
    k, v = torch.randn(b, 23, h, d, generator=g) * 2, torch.randn(b, 23, h, d, generator=g)
    ref_out, ref_lse = block_attention(q, k, v, False)
    cuts = [0, 5, 6, 17, 23]  # uneven blocks, one of a single key
    out, lse = None, None
    for lo, hi in zip(cuts, cuts[1:]):
        o, l = block_attention(q, k[:, lo:hi], v[:, lo:hi], False)
        if out is None:
            out, lse = o.clone(), l.clone()
        else:
            rb.merge_(out, lse, o.to(torch.bfloat16) if lo == 6 else o, l)  # a bf16 block, as SDPA returns
    torch.testing.assert_close(lse, ref_lse, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, ref_out, atol=2e-2, rtol=0)  # the bf16 block's rounding
    assert out.dtype == torch.float32


def test_merge_into_row_views_leaves_the_other_rows():
    g = torch.Generator().manual_seed(3)
    out, lse = torch.randn(1, 8, 2, 4, generator=g), torch.randn(1, 2, 8, generator=g)
    before_out, before_lse = out.clone(), lse.clone()
    rb.merge_(rb.part(out, "second"), rb.part(lse, "second", dim=2),
                 torch.randn(1, 4, 2, 4, generator=g), torch.randn(1, 2, 4, generator=g))
    assert torch.equal(out[:, :4], before_out[:, :4]) and torch.equal(lse[..., :4], before_lse[..., :4])
    assert not torch.equal(out[:, 4:], before_out[:, 4:]) and not torch.equal(lse[..., 4:], before_lse[..., 4:])


def test_ring_steps_cover_every_visible_key_once():
    # Zigzag causal: over the steps, each (query, key) pair with key position <= query position is
    # computed exactly once and no other pair is; non-causal: every pair once.
    for world in (1, 2, 3, 4, 5):
        c = 2
        for causal in (False, True):
            for rank in range(world):
                seen = torch.zeros(2 * c, 2 * world * c, dtype=torch.int32)
                q_pos = zz.zigzag_positions(rank, world, 2 * c)
                for step in range(world):
                    src, qp, kvp, is_causal = rb.ring_step(rank, world, step, causal)
                    assert src == (rank - step) % world
                    qi = rb.part(torch.arange(2 * c).view(1, -1), qp)[0]
                    kj = rb.part(zz.zigzag_positions(src, world, 2 * c).view(1, -1), kvp)[0]
                    assert not is_causal or (src == rank and len(qi) == len(kj))
                    for a, i in enumerate(qi.tolist()):
                        for bb, j in enumerate(kj.tolist()):
                            if not is_causal or bb <= a:
                                seen[i, j] += 1
                visible = torch.ones_like(seen) if not causal else \
                    (torch.arange(2 * world * c)[None, :] <= q_pos[:, None]).int()
                assert torch.equal(seen, visible), (world, causal, rank)


def simulate_ring(q_sh, k_sh, v_sh, causal, attn):
    """Every rank's output of the Ring baseline's algorithm, on CPU, without communication."""
    world, outs = len(q_sh), []
    for rank in range(world):
        out = lse = None
        for step in range(world):
            src, qp, kvp, is_causal = rb.ring_step(rank, world, step, causal)
            o, l = attn(rb.part(q_sh[rank], qp), rb.part(k_sh[src], kvp), rb.part(v_sh[src], kvp), is_causal)
            if step == 0:
                out, lse = o.float().clone(), l.clone()
            else:
                rb.merge_(rb.part(out, qp), rb.part(lse, qp, dim=2), o, l)
        outs.append(out)
    return outs


def simulate_allgather(q_sh, k_sh, v_sh, causal, attn):
    """Every rank's output of the AllGather baseline's algorithm, on CPU: the gathered K/V built as the
    bench's collectives lay them out."""
    world, s = len(q_sh), q_sh[0].shape[1]
    c = s // 2
    if not causal:
        kg, vg = torch.cat(k_sh, 1), torch.cat(v_sh, 1)
        return [attn(q, kg, vg, False)[0] for q in q_sh]
    # Second halves of every rank, then first halves: slot i holds global chunk allgather_slots(world)[i].
    kg, vg = (torch.cat([t[:, c:] for t in sh] + [t[:, :c] for t in sh], 1) for sh in (k_sh, v_sh))
    outs = []
    for rank in range(world):
        rows = []
        for j in range(2):
            sl = slice(j * c, (j + 1) * c)
            o, l = attn(q_sh[rank][:, sl], k_sh[rank][:, sl], v_sh[rank][:, sl], True)
            lo, hi = rb.allgather_prefix(rank, world, j)
            if lo < hi:
                o, l = o.float().clone(), l.clone()
                rb.merge_(o, l, *attn(q_sh[rank][:, sl], kg[:, lo * c:hi * c], vg[:, lo * c:hi * c], False))
            rows.append(o)
        outs.append(torch.cat(rows, 1))
    return outs


def test_allgather_slots_and_prefixes():
    for world in (1, 2, 3, 4):
        slots = rb.allgather_slots(world)
        assert sorted(slots) == list(range(2 * world))
        for rank in range(world):
            for j, chunk in enumerate((rank, 2 * world - 1 - rank)):
                lo, hi = rb.allgather_prefix(rank, world, j)
                assert sorted(slots[lo:hi]) == list(range(chunk)), (world, rank, j)


@pytest.mark.parametrize("backend", ["flash", "cudnn"])
def test_the_aten_backends_calls_fit_this_torchs_op_schema(backend):
    # The CUDA kernels cannot run here, but torch parses a call's arguments against the op's schema first (torch
    # 2.4's cuDNN op has no attn_bias / compute_log_sumexp: a call with them failed on arguments, not backend).
    q = torch.zeros(1, 2, 4, 8)
    try:
        rb.ATEN[backend](q, q, q, False, 8 ** -0.5)
    except NotImplementedError as ex:  # (no CPU kernel for the op: the arguments were taken)
        assert "CPU" in str(ex)
    except RuntimeError as ex:
        assert "argument" not in str(ex), ex


def cpu_flash(q, k, v, causal, scale):
    """The CPU flash kernel behind the bench's aten-op interface ((output, logsumexp), (B, H, S, D))."""
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, scale=scale)


def sharded(world, causal, s, hkv, seed, b=2, h=4, d=16):
    """Random full q, k, v ([b, world * s, heads, d]), each rank's shards as the bench shards them
    (zigzag when causal), and each rank's global query rows."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, world * s, h, d, generator=g)
    k, v = (torch.randn(b, world * s, hkv, d, generator=g) for _ in range(2))
    if causal:
        shard = lambda t, r: zz.zigzag_shard(t, r, world)  # noqa: E731
        rows = [zz.zigzag_positions(r, world, s) for r in range(world)]
    else:
        shard = lambda t, r: t[:, r * s:(r + 1) * s]  # noqa: E731
        rows = [torch.arange(r * s, (r + 1) * s) for r in range(world)]
    return q, k, v, [[shard(t, r) for r in range(world)] for t in (q, k, v)], rows


@pytest.mark.parametrize("algo", ["ring", "allgather"])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hkv", [4, 2])
def test_baseline_algorithms_match_full_attention(algo, world, causal, hkv, monkeypatch):
    # The bench's attention() wrapper over a CPU SDPA kernel, with GQA K/V expanded (as for a backend
    # that rejects fewer KV heads); inputs sharded as the bench shards them.
    monkeypatch.setitem(rb.ATEN, "flash", cpu_flash)
    attn = rb.attention("flash", expand_kv=True)
    q, k, v, sh, rows = sharded(world, causal, 6, hkv, world * 10 + hkv)
    outs = (simulate_ring if algo == "ring" else simulate_allgather)(*sh, causal, attn)
    for r in range(world):
        torch.testing.assert_close(outs[r].float(), bench.reference_rows(q, k, v, causal, rows[r])[0],
                                   atol=1e-4, rtol=1e-4)


def test_mkernel_variant_is_ring_attention():
    pytest.importorskip("mkernel._lib", reason="libmkernel.so not found (mk_variants imports mkernel)")
    v = bench.mk_variants(bench.parse_args([]))
    assert list(v) == ["mkernel"] and callable(v["mkernel"])


eta = _load("ring_eta", ROOT / "bench" / "ring_eta.py")


def bottom_right(q, k, v, causal):
    """(out, lse) with causal bottom-right aligned (query i sees keys j <= i + Skv - Sq), as
    mkernel.attention: the reference on the keys' positions shifted so the last query is the last key."""
    sq, skv = q.shape[1], k.shape[1]
    return bench.reference_rows(torch.cat([q.new_zeros(q.shape[0], skv - sq, *q.shape[2:]), q], 1), k, v, causal,
                                torch.arange(skv - sq, skv))


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_compute_calls_give_each_rank_its_rows_of_full_attention(world, causal):
    # The compute-alone engine calls (natural-order gathered K/V) reproduce each rank's output rows.
    b, s, h, hkv, d = 1, 6, 4, 2, 16
    g = torch.Generator().manual_seed(7 * world + causal)
    q = torch.randn(b, world * s, h, d, generator=g)
    k, v = (torch.randn(b, world * s, hkv, d, generator=g) for _ in range(2))
    for r in range(world):
        rows = zz.zigzag_positions(r, world, s) if causal else torch.arange(r * s, (r + 1) * s)
        q_local = q[:, rows]
        calls = eta.compute_calls(r, world, s, causal)
        assert sum(hi - lo for lo, hi, _, _ in calls) == s and calls[0][0] == 0
        assert all(a[1] == b_[0] for a, b_ in zip(calls, calls[1:]))  # the calls tile the local rows
        out = torch.cat([bottom_right(q_local[:, lo:hi], k[:, :kv_hi], v[:, :kv_hi], c)[0]
                         for lo, hi, kv_hi, c in calls], 1)
        torch.testing.assert_close(out, bench.reference_rows(q, k, v, causal, rows)[0], atol=1e-5, rtol=1e-5)


def test_lower_bound_and_emulated_comm():
    t = {"compute flash": 3.0, "compute cudnn": 2.0, "compute mkernel": 2.5, "comm nccl": 0.4,
         "comm mkernel": 0.9, "mkernel": 2.2}
    assert eta.lower_bound(t, False) == (2.0, ("compute cudnn", 2.0), ("comm nccl", 0.4))
    assert eta.lower_bound(t, True) == (2.0, ("compute cudnn", 2.0), ("comm mkernel", 0.9))
    net_bound = dict(t, **{"comm mkernel": 5.0, "mkernel": 5.5})
    assert eta.lower_bound(net_bound, True)[0] == 5.0 and eta.lower_bound(net_bound, False)[0] == 2.0
    assert eta.lower_bound({"comm nccl": 1.0}, True) == (None, None, None)  # a half missing: no bound
    names = ["ring flash", "allgather-mk cudnn", "mkernel"] + list(eta.COMPUTE) + list(eta.COMM)
    t = dict(net_bound, **{"ring flash": 4.0, "allgather-mk cudnn": 6.0})
    row = bench.fmt_row("2x1 emu", bench.Shape(1, 8, 8192, False), 2, names, t, emulated=True)
    cells = [c.strip() for c in row.strip("|").split("|")]
    # ..., best baseline, mkernel vs best, per round (no rounds given: -), T_lb (bound by), eta mkernel, NVLink MB
    # (no topology given: -), network MB (no count given: -). Emulated nodes: only the baseline on the op's
    # transport can be the best (NCCL's ring crosses NVLink).
    # mkernel's check vs fp32 at the shape (none given: -).
    assert cells[-8:] == ["allgather-mk cudnn (6.000 ms)", "1.09", "-", "5.000 (comm mkernel)", "0.91", "-", "-",
                          "-"]
    one_node = [c.strip() for c in bench.fmt_row("1x2", bench.Shape(1, 8, 8192, False), 2, names, t).strip("|").split("|")]
    assert one_node[-8] == "ring flash (4.000 ms)"
    # The best baseline's time over mkernel's round by round: p10 / median / p90 (the best by medians: ring flash).
    paired = bench.fmt_row("1x2", bench.Shape(1, 8, 8192, False), 2, names, t,
                           rounds={"ring flash": [4.0, 4.4, 3.6], "mkernel": [4.0, 4.0, 4.0]})
    assert [c.strip() for c in paired.strip("|").split("|")][-6] == "0.9000 / 1.0000 / 1.1000"
    hdr = bench.header(names).split("\n")[0]
    assert len([c for c in hdr.strip("|").split("|")]) == len(cells)
    # The network column: the formula (B Hkv 2 S D 2 B per other node) / the proxies' min-max count.
    same = bench.fmt_row("2x1 emu", bench.Shape(1, 8, 8192, False), 2, names, t, True, (2, 33554432.0, 33554432.0))
    assert same.strip("|").split("|")[-2].strip() == "33.6 / 33.6"
    spread = bench.fmt_row("2x1 emu", bench.Shape(1, 8, 8192, False), 2, names, t, True, (2, 3.3e7, 3.4e7))
    assert spread.strip("|").split("|")[-2].strip() == "33.6 / 33.0-34.0"
    # The check's cell: O / LSE errors, or why it was not checked.
    checked = bench.fmt_row("1x2", bench.Shape(1, 8, 8192, False), 2, names, t, check=(3.1e-3, 2e-5))
    assert checked.strip("|").split("|")[-1].strip() == "3.10e-03 / 2.00e-05"
    assert bench.fmt_row("1x2", bench.Shape(1, 8, 8192, False), 2, names, t,
                         check="not checked: OutOfMemoryError").strip("|").split("|")[-1].strip().startswith("not")


def test_only_selects_variants():
    a = bench.parse_args(["--only", "mkernel, comm mkernel"])
    assert a.only_list == ["mkernel", "comm mkernel"]
    assert bench.parse_args([]).only_list == []


@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_allgather_overlap_baseline_parts_match_full_attention(world, causal, monkeypatch):
    # AllGatherMkOverlap's compute (its own K/V first, then the gathered others, merged), on CPU with the
    # gathered K/V laid out as its mkernel.all_gather calls lay them out; the streams are the GPU's business.
    monkeypatch.setitem(rb.ATEN, "flash", cpu_flash)
    attn = rb.attention("flash", expand_kv=True)
    b, s, h, hkv, d = 2, 6, 4, 2, 16
    q, k, v, sh, rows = sharded(world, causal, s, hkv, 7 * world + causal, b=b, h=h, d=d)
    c = s // 2
    if causal:  # second halves of every rank, then first halves (allgather_slots)
        kg, vg = (torch.cat([t[:, c:] for t in x] + [t[:, :c] for t in x], 1) for x in sh[1:])
    else:
        kg, vg = torch.cat(sh[1], 1), torch.cat(sh[2], 1)
    for r in range(world):
        o = object.__new__(rb.AllGatherMkOverlap)  # (its __init__ allocates on the GPU)
        o.shape, o.attn, o.rank, o.world = bench.Shape(b, hkv, s, causal, h=h, d=d), attn, r, world
        o.kg, o.vg = kg, vg
        o.out, o.lse = torch.full((b, s, h, d), float("nan")), torch.full((b, h, s), float("nan"))
        o.final = torch.empty(b, s, h, d)
        o.local_part(sh[0][r], sh[1][r], sh[2][r])
        got = o.remote_part(sh[0][r])
        torch.testing.assert_close(got.float(), bench.reference_rows(q, k, v, causal, rows[r])[0],
                                   atol=1e-4, rtol=1e-4)


def test_emulated_nodes_take_both_mkernel_transport_baselines():
    assert bench.baseline_candidates(True) == ("allgather-mk cudnn", "allgather-mk-overlap cudnn")
    assert "ring flash" in bench.baseline_candidates(False)


def test_nvlink_column_and_failed_cells():
    names = ["ring flash", "mkernel"] + list(eta.COMPUTE) + list(eta.COMM)
    shape = bench.Shape(1, 32, 2048, True)
    t = {"ring flash": 1.0, "compute flash": 0.5, "comm nccl": 0.2}
    cells = lambda row: [c.strip() for c in row.strip("|").split("|")]  # noqa: E731
    # RingAttention::nvlink_bytes_sent: B Hkv 2 S D 2 B x (GPUs per node - 1) x nodes: 33.6 MB on 1x2, 0 on 2x1.
    assert cells(bench.fmt_row("1x2", shape, 2, names, t, topo=(1, 2)))[-3] == "33.6"
    assert cells(bench.fmt_row("2x1 emu", shape, 2, names, t, True, topo=(2, 1)))[-3] == "0.0"
    hdr = [c.strip() for c in bench.header(names).split("\n")[0].strip("|").split("|")]
    assert hdr[-3:] == ["NVLink MB per GPU per mkernel call (formula)",
                        "network MB per GPU per mkernel call (formula / measured)", bench.CHECK_COL]
    # A variant that failed says so (tools/issue_targets.py: a miss); one not run at this shape: '-'.
    row = dict(zip(hdr, cells(bench.fmt_row("1x2", shape, 2, names, t, failed={"mkernel", "comm mkernel"}))))
    assert (row["mkernel ms"], row["mkernel TFLOP/s"], row["comm mkernel ms"]) == ("failed", "failed", "failed")
    assert (row["compute cudnn ms"], row["eta mkernel"]) == ("-", "-")


class _Event:
    """A CUDA event on the CPU: every timed call takes 1 ms."""

    def __init__(self, **_):
        pass

    def record(self):
        pass

    def elapsed_time(self, other):
        return 1.0


@pytest.fixture
def no_gpu(monkeypatch):
    """The timing loop and the agreement over ranks on the CPU, one rank: the GPU calls and the barriers do
    nothing, max_over_ranks is this rank's values (tests replace it to play a second rank)."""
    import sys
    dt = sys.modules["dist_timing"]
    for name, fn in (("synchronize", lambda: None), ("_sleep", lambda n: None), ("empty_cache", lambda: None),
                     ("Event", _Event)):
        monkeypatch.setattr(dt.torch.cuda, name, fn)
    monkeypatch.setattr(dt.dist, "barrier", lambda: None)
    monkeypatch.setattr(dt, "gpu_lead", lambda cycles: None)  # (mkernel's timed GPU spin)
    monkeypatch.setattr(dt, "max_over_ranks", lambda v: list(v))
    monkeypatch.setattr(bench, "max_over_ranks", lambda v: list(v))
    return dt


def _oom(*_):
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")


def test_a_timed_call_that_fails_ends_the_measurement(no_gpu):
    # (A rank that failed inside a collective cannot be agreed with: the run ends, torchrun stops the other.)
    def call(_):
        _oom()
    with pytest.raises(torch.cuda.OutOfMemoryError):
        no_gpu.measure({"c": call}, [None], rounds=2, warmup=0, lead_cycles=0)


def test_run_shape_records_failed_variants_and_inputs(no_gpu, monkeypatch):
    monkeypatch.setattr(bench, "input_pool", lambda shape, gen, l2: [("q", "k", "v")] * 2)
    peer = {}  # the other rank's outcome of the next step agreed on

    def agree(flag):
        return flag and not peer.pop("fails", False)
    monkeypatch.setattr(bench, "agree", agree)

    def peer_fails_build(shape, ctx):
        peer["fails"] = True
        return lambda qkv: None
    builders = {"ok": lambda shape, ctx: (lambda qkv: None), "oom at build": _oom,
                "oom at first call": lambda shape, ctx: _oom, "peer oom": peer_fails_build,
                "mkernel": lambda shape, ctx: (lambda qkv: None)}
    args = bench.parse_args(["--rounds", "3", "--warmup", "1"])
    ctx, shape = bench.Ctx(0, 2), bench.Shape(4, 32, 32768, False)
    times, errs, net = bench.run_shape(shape, builders, ctx, None, args, 0)
    assert times == {"ok": 1.0, "mkernel": 1.0} and net is None  # (no communicator: no byte count)
    assert errs["oom at build"].startswith("failed: OutOfMemoryError: CUDA out of memory")
    assert errs["oom at first call"].startswith("failed: OutOfMemoryError")
    assert errs["peer oom"] == "failed: on another rank"
    # The inputs themselves do not fit: every variant failed at this shape, nothing built.
    monkeypatch.setattr(bench, "input_pool", _oom)
    times, errs, net = bench.run_shape(shape, builders, ctx, None, args, 0)
    assert times == {} and set(errs) == set(builders)
    assert all(e.startswith("failed: inputs: OutOfMemoryError") for e in errs.values())




def test_run_shape_checks_mkernel_on_inputs_no_call_has_seen(no_gpu, monkeypatch):
    # The sampled check after the timing runs on a fresh random set, not on one of the timed (or byte-counted)
    # calls' inputs: a result left over from an earlier call on the same inputs (a wait that passed early) would
    # otherwise read as right.
    pool = [("q0", "k0", "v0"), ("q1", "k1", "v1")]
    monkeypatch.setattr(bench, "input_pool", lambda shape, gen, l2: pool)
    monkeypatch.setattr(bench, "random_inputs", lambda shape, gen: ("fresh q", "fresh k", "fresh v"))
    monkeypatch.setattr(bench, "agree", lambda flag: flag)
    calls, checked = [], []

    def mk(qkv):
        calls.append(qkv)
    mk.poison_outputs = lambda: None
    monkeypatch.setattr(bench, "sampled_check", lambda shape, fn, qkv, ctx: checked.append((qkv, list(calls))))

    class Comm:
        def network_bytes_put(self):
            return len(calls)

        def info(self):
            return {"num_nodes": 1}
    ctx, shape = bench.Ctx(0, 2), bench.Shape(1, 2, 256, False)
    ctx.comm = Comm()
    args = bench.parse_args(["--rounds", "3", "--warmup", "1"])
    times, errs, net = bench.run_shape(shape, {"mkernel": lambda shape, ctx: mk}, ctx, None, args, 0)
    assert times == {"mkernel": 1.0} and net == (1, 1.0, 1.0)
    (qkv, before), = checked
    assert qkv == ("fresh q", "fresh k", "fresh v") and qkv not in before and before[-1] == pool[1]
    # Fresh inputs that do not fit: the row says not checked (agreed), nothing raised.
    monkeypatch.setattr(bench, "random_inputs", _oom)
    bench.run_shape(shape, {"mkernel": lambda shape, ctx: mk}, ctx, None, args, 0)
    assert ctx.checked[shape].startswith("not checked (fresh inputs): OutOfMemoryError")


@pytest.mark.parametrize("s,causal", [(40, False), (1000, False), (1000, True), (32768, True), (300, True), (1, True)])
def test_sample_rows_reach_every_tile_and_each_chunks_edges(s, causal):
    # One row in every 128-row tile (the partial last one too), the shard's and each zigzag chunk's first and last
    # rows, at least SAMPLED_ROWS in all (or every row), sorted and distinct.
    rows = bench.sample_rows(s, causal, torch.Generator().manual_seed(5)).tolist()
    assert rows == sorted(set(rows)) and all(0 <= r < s for r in rows)
    assert len(rows) >= min(s, bench.SAMPLED_ROWS)
    assert {r // bench.ROW_TILE for r in rows} == set(range(-(-s // bench.ROW_TILE)))
    assert {0, s - 1} <= set(rows) and (not causal or s < 2 or {s // 2 - 1, s // 2} <= set(rows))


def test_measure_takes_each_calls_slowest_rank_then_the_median(no_gpu, monkeypatch):
    # Two ranks, three rounds of one variant: rank times [1, 5, 2] and [4, 1, 3] -> per call max [4, 5, 3],
    # median 4 (a median per rank, then the max, would say max(2, 3) = 3).
    other = [4.0, 1.0, 3.0]
    mine = iter([1.0, 5.0, 2.0])

    class Ev:
        def __init__(self, **_):
            self.t = None

        def record(self):
            pass

        def elapsed_time(self, _end):
            return self.t
    made = []

    def event(**kw):
        e = Ev(**kw)
        made.append(e)
        return e
    monkeypatch.setattr(no_gpu.torch.cuda, "Event", event)
    # (the other rank's side of the exchange: its per-call times, or, given one median, its median)
    monkeypatch.setattr(no_gpu, "max_over_ranks", lambda v: [max(a, b) for a, b in zip(v, other)]
                        if len(v) == len(other) else [max(v[0], sorted(other)[1])])

    def call(_):
        made[-2].t = next(mine)  # (the start event of this call carries its time)
    assert no_gpu.measure({"c": call}, [None], rounds=3, warmup=0, lead_cycles=0) == {"c": 4.0}


def test_measure_back_to_back_queues_a_device_barrier_and_never_syncs_inside_the_rounds(no_gpu, monkeypatch):
    # torch_tp_bench.py --back-to-back: a barrier on the stream before every call (warm-up included), no host sync
    # and no host barrier between calls: one sync after warm-up (the sampler's start) and one at the end.
    log = []
    monkeypatch.setattr(no_gpu.torch.cuda, "synchronize", lambda: log.append("sync"))
    monkeypatch.setattr(no_gpu.dist, "barrier", lambda: log.append("host barrier"))
    t = no_gpu.measure({"a": lambda _: log.append("a"), "b": lambda _: log.append("b")}, [None], rounds=2, warmup=1,
                       lead_cycles=0, device_barrier=lambda: log.append("device barrier"))
    assert t == {"a": 1.0, "b": 1.0}
    assert "host barrier" not in log and log.count("sync") == 2 and log[-1] == "sync"
    at = [j for j, x in enumerate(log) if x in ("a", "b")]
    assert len(at) == 6 and all(log[j - 1] == "device barrier" for j in at)  # 3 rounds of 2 calls
    # The default: a host sync and a host barrier before every call.
    log.clear()
    no_gpu.measure({"a": lambda _: log.append("a")}, [None], rounds=2, warmup=0, lead_cycles=0)
    assert log == ["sync", "sync", "host barrier", "a", "sync", "host barrier", "a", "sync"]


def test_provenance_names_the_library_build_once_and_the_judge_reads_it(monkeypatch):
    pytest.importorskip("mkernel._lib", reason="libmkernel.so not found (provenance reads its build commit)")
    import re
    import sys
    dt = sys.modules["dist_timing"]
    judge = re.compile(r"(commit [0-9a-f]{7,40}(?:-dirty)?(?: \(tracked files modified\))?)")  # issue_targets.py
    # A tree at another commit than the build's, with edits: the build first, the tree beside it.
    monkeypatch.setattr(dt, "sh", lambda *cmd: "0123456789ab" if "rev-parse" in cmd else " M bench/x.py")
    line = "commit " + dt.provenance()
    assert not line.startswith("commit commit") and "sha256" in line, line
    from mkernel._lib import lib
    import ctypes
    lib.mk_build_commit.restype = ctypes.c_char_p  # (part of the C ABI: no library without it passes unchecked)
    built = lib.mk_build_commit().decode()
    if built == "unknown":  # a build without a readable git (a tarball, a copy without .git): the tree's line
        assert line.startswith("commit 0123456789ab (tracked files modified), library "), line
        return
    assert judge.search(line).group(1) == "commit " + built, line
    assert "this tree: 0123456789ab (tracked files modified)" in line, line


ref = _load("attn_ref", ROOT / "bench" / "attn_ref.py")


def _attention_f64(q, k, v, causal, rows):
    """Plain float64 attention (whole scores at once) for rows `rows`: what attn_ref must equal."""
    h, d, s = q.shape[2], q.shape[3], k.shape[1]
    qf = q[:, rows].double().transpose(1, 2)
    kf, vf = (t.double().repeat_interleave(h // t.shape[2], dim=2).transpose(1, 2) for t in (k, v))
    sc = (qf @ kf.transpose(-1, -2)) / d ** 0.5
    if causal:
        sc = sc.masked_fill(rows[:, None] < torch.arange(s)[None, :], float("-inf"))
    return (torch.softmax(sc, -1) @ vf).transpose(1, 2), torch.logsumexp(sc, -1)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("budget", [1 << 30, 8 * 24, 8 * 24 * 3])  # one block; one row and head; 3 rows, 1 head
def test_the_fp32_reference_in_blocks_is_exact_attention(causal, budget):
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 24, 8, 16, generator=g).bfloat16()
    k, v = (torch.randn(2, 24, 2, 16, generator=g).bfloat16() for _ in range(2))  # GQA: 4 query heads per KV head
    rows = torch.tensor([0, 1, 7, 8, 23, 12])
    out, lse = ref.reference_rows(q, k, v, causal, rows, budget=budget)
    want_out, want_lse = _attention_f64(q, k, v, causal, rows)
    assert out.dtype == lse.dtype == torch.float32 and out.shape == (2, 6, 8, 16) and lse.shape == (2, 8, 6)
    torch.testing.assert_close(out.double(), want_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="do not fit together"):
        ref.reference_for(q[:, rows], k[:, :, :1].expand(2, 24, 3, 16), v, causal, rows)


def test_the_issue_error_measures():
    r = torch.tensor([[1.0, -2.0], [0.5, 4.0]])
    assert ref.out_error(r, r) == 0.0
    assert ref.out_error(r * 1.01, r) == pytest.approx(0.01, rel=1e-5)
    assert ref.lse_error(torch.tensor([0.0005, 10.02]), torch.tensor([0.0, 10.0])) == pytest.approx(0.002, rel=1e-3)
    nan = torch.tensor([float("nan"), 1.0])
    assert ref.out_error(nan, torch.ones(2)) != ref.out_error(nan, torch.ones(2))  # NaN
    assert ref.lse_error(nan, torch.ones(2)) != ref.lse_error(nan, torch.ones(2))
    assert ref.within(9e-3, 9e-4) and not ref.within(1.1e-2, 0) and not ref.within(0, 2e-3)
    assert not ref.within(float("nan"), 0) and not ref.within(0, float("nan")) and ref.within(5e-3)


@pytest.mark.parametrize("causal", [False, True])
def test_sampled_check_of_a_timed_shape(no_gpu, monkeypatch, causal):
    # One rank (world 1) on the CPU: the all-gather of K/V copies; a variant whose out and lse are the reference's
    # passes, one off by 2% in out or with an lse off by 1e-2 fails its measure, one that leaves rows unwritten
    # reads as inf, and one that raises is "not checked".
    pytest.importorskip("mkernel.zigzag")
    monkeypatch.setattr(bench.dist, "all_gather", lambda outs, t: outs[0].copy_(t))
    monkeypatch.setattr(bench, "agree", lambda flag: flag)
    shape = bench.Shape(2, 2, 40, causal, h=4, d=16)
    g = torch.Generator().manual_seed(11)
    q = torch.randn(2, 40, 4, 16, generator=g).bfloat16()
    k, v = (torch.randn(2, 40, 2, 16, generator=g).bfloat16() for _ in range(2))
    if causal:
        q, k, v = (zz.zigzag_shard(t, 0, 1) for t in (q, k, v))  # (world 1: the identity)
    want_out, want_lse = ref.reference_rows(q, k, v, causal, torch.arange(40))

    def variant(scale_out=1.0, lse_off=0.0, unwritten=False):
        state = {}

        def fn(qkv):
            state["out"] = want_out.clone() * scale_out
            state["lse"] = want_lse.clone() + lse_off
            if unwritten:
                state["out"][:, 3] = float("nan")
            return state["out"]
        fn.last_lse, fn.poison_outputs = (lambda: state["lse"]), (lambda: state.clear())
        return fn
    ctx = bench.Ctx(0, 1)
    monkeypatch.setattr(bench, "SAMPLED_ROWS", 40)  # every row (the unwritten one among them)
    eo, el = bench.sampled_check(shape, variant(), (q, k, v), ctx)
    assert eo < 1e-6 and el < 1e-6
    assert bench.sampled_check(shape, variant(scale_out=1.02), (q, k, v), ctx)[0] == pytest.approx(0.02, rel=1e-3)
    assert bench.sampled_check(shape, variant(lse_off=1e-2), (q, k, v), ctx)[1] > 1e-3
    assert bench.sampled_check(shape, variant(unwritten=True), (q, k, v), ctx)[0] == float("inf")

    def raises(qkv):
        _oom()
    raises.last_lse, raises.poison_outputs = (lambda: None), (lambda: None)
    assert bench.sampled_check(shape, raises, (q, k, v), ctx).startswith("not checked (the call): OutOfMemoryError")


def test_sampled_check_agrees_before_the_gathers(no_gpu, monkeypatch):
    # A rank that fails its call (out of memory, say) must not leave the other rank waiting in NCCL's all-gather:
    # the ranks agree after the call, before any gather, and neither gathers then.
    pytest.importorskip("mkernel.zigzag")
    gathers, agreed = [], []
    monkeypatch.setattr(bench.dist, "all_gather", lambda outs, t: gathers.append(t))
    peer_fails = iter([True])  # the other rank fails the first step agreed on

    def agree(flag):
        agreed.append(flag)
        return flag and not next(peer_fails, False)
    monkeypatch.setattr(bench, "agree", agree)
    q = torch.zeros(1, 8, 2, 16)
    fn = lambda qkv: qkv[0]  # noqa: E731
    fn.last_lse, fn.poison_outputs = (lambda: torch.zeros(1, 2, 8)), (lambda: None)
    got = bench.sampled_check(bench.Shape(1, 2, 8, False, h=2, d=16), fn, (q, q, q), bench.Ctx(0, 2))
    assert got == "not checked (the call): failed on another rank" and gathers == [] and agreed == [True]


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("causal", [False, True])
def test_sampled_check_maps_each_ranks_rows_to_their_global_positions(no_gpu, monkeypatch, world, causal):
    # Several ranks, one at a time on the CPU: every rank's K/V shards come back from the (stood-in) all-gather in
    # rank order, as NCCL gives them; a rank whose out and lse are the whole sequence's reference at its rows (zigzag
    # when causal) passes, and one that holds another rank's rows fails: the check reads the right global positions.
    pytest.importorskip("mkernel.zigzag")
    monkeypatch.setattr(bench, "agree", lambda flag: flag)
    monkeypatch.setattr(bench, "SAMPLED_ROWS", 12)
    s = 8
    q, k, v, sh, rows = sharded(world, causal, s, 2, 40 + world, b=1, h=4, d=16)
    full_out, full_lse = ref.reference_rows(q, k, v, causal, torch.arange(world * s))

    def gather(outs, t):
        src = sh[1] if any(torch.equal(t, x) for x in sh[1]) else sh[2]
        for j, x in enumerate(src):
            outs[j].copy_(x)
    monkeypatch.setattr(bench.dist, "all_gather", gather)

    def variant(r):  # the reference's rows of rank r, as mkernel would return them on its rank
        fn = lambda qkv: full_out[:, rows[r]].clone()  # noqa: E731
        fn.last_lse, fn.poison_outputs = (lambda: full_lse[:, :, rows[r]].clone()), (lambda: None)
        return fn
    shape = bench.Shape(1, 2, s, causal, h=4, d=16)
    for r in range(world):
        qkv = (sh[0][r], sh[1][r], sh[2][r])
        eo, el = bench.sampled_check(shape, variant(r), qkv, bench.Ctx(r, world))
        assert eo < 1e-6 and el < 1e-6, (r, eo, el)
        wrong = bench.sampled_check(shape, variant((r + 1) % world), qkv, bench.Ctx(r, world))
        assert wrong[0] > 0.1, (r, wrong)


@pytest.mark.parametrize("nodes,local,hosts,label", [(1, 2, 1, "1x2"), (2, 1, 1, "2x1 emu (mkernel)"),
                                                     (2, 4, 2, "2x4"), (4, 2, 2, "4x2 emu (mkernel)")])
def test_the_config_label_comes_from_the_communicator(nodes, local, hosts, label):
    # (it read MK_RANKS_PER_NODE itself: 0, the declared default, divided by zero; a real run across nodes
    # without it was labelled 1xW; emulated nodes are those past the job's hosts)
    assert bench.config_label({"num_nodes": nodes, "local_size": local}, hosts) == (label, "emu" in label)


def test_the_judge_asks_for_the_columns_this_bench_writes():
    # tools/issue_targets.py keeps its own copy of the baselines and halves (it runs without torch): the same names,
    # and on emulated nodes the same candidates, as this bench and ring_eta.
    it = _load("issue_targets_for_ring_test", ROOT / "tools" / "issue_targets.py")
    eta = sys.modules["ring_eta"]
    assert it.RING_BASELINES == tuple(bench.BASELINES) and it.RING_COMPUTE == eta.COMPUTE
    for emulated, config in ((False, "1x2"), (True, "2x1 emu")):
        base, halves = it.ring_needs({"config": config})
        assert base == bench.baseline_candidates(emulated)
        assert halves == eta.COMPUTE + eta.comm_candidates(emulated)


def test_the_lead_before_a_timed_call_is_mkernels_timed_spin(monkeypatch):
    # (torch.cuda._sleep counts SM cycles: ranks at different clocks left it apart; mk_gpu_spin waits the cycles'
    # time at the top clock)
    pytest.importorskip("mkernel._lib")
    import types
    from mkernel import _lib
    dt = sys.modules["dist_timing"]
    calls = []
    monkeypatch.setattr(_lib.lib, "mk_gpu_spin", lambda cycles, stream: calls.append((cycles, stream)) or 0)
    monkeypatch.setattr(dt.torch.cuda, "current_stream", lambda: types.SimpleNamespace(cuda_stream=1234))
    monkeypatch.setattr(dt.torch.cuda, "_sleep", lambda n: calls.append(("_sleep", n)))
    dt.gpu_lead(2_000_000)
    assert calls == [(2_000_000, 1234)]
