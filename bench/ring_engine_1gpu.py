"""The ring-attention kernel's engine on one GPU: mkernel.ring_attention on a one-rank communicator (the ring
kernel with its K/V push role idle: nothing to send) against the one-GPU op (mkernel.attention) and SDPA's
cuDNN backend, interleaved call by call in one run (device machine, one GPU):

    PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so python3 bench/ring_engine_1gpu.py [--quick] [--out DIR]

Why: the ring kernel runs the attention engine in another register budget than the one-GPU op (its producer
warpgroup also runs the push; device/attention/attn_engine.cuh Regs), so its key blocks may differ; this
measures what that costs without a second GPU. Shapes: batch 1, 32 query heads, 32 or 8 KV heads, D = 128,
S in {8k, 16k, 32k} (--quick: 16k and 32k, Hkv 8), causal and not (causal: the one-rank zigzag shard is
the sequence itself). Timing per MEASURING.md: CUDA events, warm-up, median of --rounds calls, inputs
rotated over a pool > 2x L2 of random data, variants in an order rotated every round. Each shape checks the
ring op's out and lse against the one-GPU op's (max |d| / max |ref|) before timing.
Writes ring-engine-1gpu-<UTC stamp>.md under --out.
"""
import argparse, datetime, os, statistics, sys  # noqa: E401

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_bench import L2_BYTES, mkernel, repeated_kv, sdpa, sdpa_takes_gqa  # noqa: E402  (the same SDPA call)
from dist_timing import call_order  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=20)  # (MEASURING.md's median of 20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default="bench/results")
    return ap.parse_args()


def main():
    args = parse_args()
    dev = torch.device("cuda")
    comm = mkernel.Communicator(0, 1, mkernel.get_unique_id())
    cudnn = sdpa(torch.nn.attention.SDPBackend.CUDNN_ATTENTION)
    takes_gqa = sdpa_takes_gqa()
    shapes = [(1, s, 32, hkv, 128, c) for s in ((16384, 32768) if args.quick else (8192, 16384, 32768))
              for hkv in ((8,) if args.quick else (32, 8)) for c in (False, True)]
    rows = []
    for (b, s, h, hkv, d, causal) in shapes:
        per = (b * s * (h + 2 * hkv) * d) * 2
        pool = max(2, -(-2 * L2_BYTES // per))
        data = [(torch.randn(b, s, h, d, device=dev).bfloat16(), torch.randn(b, s, hkv, d, device=dev).bfloat16(),
                 torch.randn(b, s, hkv, d, device=dev).bfloat16()) for _ in range(pool)]
        out1, lse1 = torch.empty(b, s, h, d, device=dev, dtype=torch.bfloat16), torch.empty(b, h, s, device=dev)
        outr, lser = torch.empty_like(out1), torch.empty_like(lse1)
        kvr = repeated_kv(data, h) if hkv != h and not takes_gqa else None  # (torch < 2.5: no enable_gqa)
        fns = {
            "one-GPU op": lambda q, k, v: mkernel.attention(q, k, v, causal=causal, out=out1, lse=lse1),
            "ring op, 1 rank": lambda q, k, v: mkernel.ring_attention(q, k, v, comm, causal=causal, out=outr,
                                                                      lse=lser),
            "torch cudnn": lambda q, k, v: cudnn(q, k, v, causal, kvr),
        }
        q, k, v = data[0]
        fns["one-GPU op"](q, k, v)
        fns["ring op, 1 rank"](q, k, v)
        torch.cuda.synchronize()
        err_o = ((outr.float() - out1.float()).abs().max() / out1.float().abs().max()).item()
        err_l = ((lser - lse1).abs().max() / lse1.abs().max()).item()
        if not (err_o < 1e-2 and err_l < 1e-3):
            raise SystemExit(f"ring op (1 rank) differs from the one-GPU op at {(b, s, h, hkv, d, causal)}: "
                             f"out {err_o:.2e}, lse {err_l:.2e}")
        times = {n: [] for n in fns}
        names = list(fns)
        for it in range(args.warmup + args.rounds):
            for n in (names[i] for i in call_order(len(names), it)):  # balanced (dist_timing.call_order)
                q, k, v = data[it % pool]
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fns[n](q, k, v)
                e1.record()
                torch.cuda.synchronize()
                if it >= args.warmup:
                    times[n].append(e0.elapsed_time(e1))
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        row = {"shape": (b, s, h, hkv, d, causal), "flops": flops, "err": (err_o, err_l)}
        row.update({n: statistics.median(times[n]) for n in names})
        rows.append(row)
        print(f"B={b} S={s} Hkv={hkv} causal={int(causal)}: " +
              " ".join(f"{n} {row[n]:.3f} ms" for n in names) +
              f"; ring / one-GPU {row['one-GPU op'] / row['ring op, 1 rank']:.3f}x", flush=True)
        del data
    write_report(args, rows, takes_gqa)


def write_report(args, rows, takes_gqa=True):
    from dist_timing import provenance  # the commit and the library that ran
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"ring-engine-1gpu-{stamp}.md")
    names = ["one-GPU op", "ring op, 1 rank", "torch cudnn"]
    with open(path, "w") as fh:
        fh.write(f"# The ring kernel's engine on one GPU ({stamp})\n\n`python3 bench/ring_engine_1gpu.py"
                 f"{' --quick' if args.quick else ''}`; commit {provenance()}; {torch.cuda.get_device_name()}.\n"
                 f"Median of {args.rounds} calls after {args.warmup} warm-up, CUDA events, inputs rotated over a "
                 "pool > 2x L2, variants in an order rotated every round. TFLOP/s = 4 B H S^2 D / t (x 0.5 "
                 "causal). check: the ring op's out / lse against the one-GPU op's, max |d| / max |ref|." +
                 ("" if takes_gqa else " This torch's SDPA has no enable_gqa (torch < 2.5): at Hkv < H the torch "
                  "column is SDPA on K/V repeated to the H query heads, copies made before the timing.") + "\n\n")
        fh.write("| B | S | H | Hkv | D | causal | " + " | ".join(f"{n} ms | TF/s" for n in names) +
                 " | ring / one-GPU op | ring / cudnn | check out / lse |\n")
        fh.write("|" + "---|" * (6 + 2 * len(names) + 3) + "\n")
        for r in rows:
            b, s, h, hkv, d, causal = r["shape"]
            cells = " | ".join(f"{r[n]:.3f} | {r['flops'] / r[n] / 1e9:.0f}" for n in names)
            ring = r["ring op, 1 rank"]
            fh.write(f"| {b} | {s} | {h} | {hkv} | {d} | {int(causal)} | {cells} | {r['one-GPU op'] / ring:.3f}x | "
                     f"{r['torch cudnn'] / ring:.3f}x | {r['err'][0]:.1e} / {r['err'][1]:.1e} |\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
