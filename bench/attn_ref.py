"""The attention reference the attention benchmarks check mkernel against (at least fp32: computed in fp64), and the
issue's two error measures (issue [ring-attn]: against attention in fp32 on the full, unsharded sequence; relative
error < 1e-2 on O, < 1e-3 on LSE).

The reference is an exact softmax computed in fp64 (so no TF32 setting of the caller's can lower it; on an H100
or H200 fp64 matmuls run at about fp32's non-tensor-core rate) and returned in fp32, in blocks of query heads and
query rows so that one block's scores stay under a byte budget: SDPA's math backend in fp32 would hold all
B H S^2 scores at once (137 GB at S = 32k, H = 32). Plain torch, so it runs on the CPU too
(tests/python/test_ring_bench_cpu.py)."""
import torch

OUT_BOUND = 1e-2  # relative Frobenius error of O
LSE_BOUND = 1e-3  # max |lse - ref| / max(|ref|, 1)
BUDGET = 1 << 30  # bytes of (fp64) scores per block


def reference_for(q_rows, k, v, causal, positions, budget=BUDGET):
    """Attention (computed in fp64) of the query rows q_rows (B, R, H, D), at global positions `positions` (R,),
    over the keys of a whole sequence k, v (B, S, Hkv, D); query head h reads KV head h // (H / Hkv) (GQA); when
    causal, keys after a row's position are masked out. Scale 1 / sqrt(D). Returns (out (B, R, H, D),
    lse (B, H, R)), fp32, lse the natural log-sum-exp of the scaled scores (mkernel's and SDPA's convention)."""
    b, r, h, d = q_rows.shape
    s, hkv = k.shape[1], k.shape[2]
    if h % hkv or v.shape != k.shape or k.shape[0] != b or k.shape[3] != d or positions.numel() != r:
        raise ValueError(f"reference_for: q rows {tuple(q_rows.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, "
                         f"{positions.numel()} positions do not fit together")
    g, dev = h // hkv, q_rows.device
    pos, keys = positions.to(dev), torch.arange(s, device=dev)
    out = torch.empty(b, r, h, d, device=dev, dtype=torch.float32)
    lse = torch.empty(b, h, r, device=dev, dtype=torch.float32)
    rows_blk = max(1, min(r, budget // (8 * s)))
    heads_blk = max(1, min(g, budget // (8 * s * rows_blk)))  # query heads of one KV head per block
    for bi in range(b):
        for kh in range(hkv):
            kf, vf = k[bi, :, kh].double(), v[bi, :, kh].double()  # (S, D)
            for h0 in range(kh * g, (kh + 1) * g, heads_blk):
                h1 = min(h0 + heads_blk, (kh + 1) * g)
                for r0 in range(0, r, rows_blk):
                    r1 = min(r0 + rows_blk, r)
                    sc = (q_rows[bi, r0:r1, h0:h1].double().transpose(0, 1) @ kf.T) * d ** -0.5  # (heads, rows, S)
                    if causal:
                        sc.masked_fill_(pos[r0:r1, None] < keys[None, :], float("-inf"))
                    m = torch.logsumexp(sc, dim=-1)  # (heads, rows)
                    out[bi, r0:r1, h0:h1] = (torch.exp(sc - m[..., None]) @ vf).transpose(0, 1).float()
                    lse[bi, h0:h1, r0:r1] = m.float()
    return out, lse


def reference_rows(q, k, v, causal, rows, budget=BUDGET):
    """Attention (computed in fp64) of a whole sequence q, k, v (B, S, heads, D) for its query rows `rows` (global
    positions): (out (B, R, H, D), lse (B, H, R)); reference_for on q's rows."""
    return reference_for(q[:, rows.to(q.device)], k, v, causal, rows, budget)


def out_error(got, ref):
    """Relative Frobenius error ||got - ref|| / ||ref|| (NaN when got holds a NaN: an unwritten row)."""
    return ((got.float() - ref).norm() / ref.norm()).item()


def lse_error(got, ref):
    """max |got - ref| / max(|ref|, 1), elementwise (NaN when got holds a NaN)."""
    d = (got.float() - ref).abs() / ref.abs().clamp_min(1.0)
    return float("nan") if torch.isnan(d).any() else d.max().item()


def within(out_err, lse_err=None):
    """Whether the errors meet the issue's bounds (a NaN never does; lse_err None: not measured)."""
    return out_err <= OUT_BOUND and (lse_err is None or lse_err <= LSE_BOUND)
