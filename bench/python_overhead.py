"""Host cost of one steady-state op call from Python, against the C ABI called
directly (ctypes, no torch) and torch's dispatcher path (torch.ops), on a
GEMM small enough that the GPU keeps up with the host.

    PYTHONPATH=python MK_LIBRARY=build/lib/libmkernel.so python3 bench/python_overhead.py [--out DIR]

Each figure: median over 51 rounds of (host wall time of 64 back-to-back
calls) / 64, the GPU drained between rounds; 8 compute CTAs, so a call's GPU
time stays below its host time and the host never waits for the GPU (with
all 132 CTAs a 64^3 GEMM takes longer on the GPU than on the host, and the
figure would be the GPU's). Target (issue [python]): mkernel.gemm under 10 us per call.
The C++ figure for the same call is mkbench gemm's "host cost per call" row.

Also mkernel.attention (tiny) against its C ABI call. Under torchrun it also
times the tensor-parallel ops (mkernel.gemm_rs / gemm_ar / ag_gemm), the
standalone collectives (all_gather / reduce_scatter / all_reduce) and
mkernel.ring_attention, steady state, tiny shapes, against their plan's C ABI
call:

    torchrun --standalone --nproc_per_node=2 bench/python_overhead.py
    torchrun --standalone --nproc_per_node=1 bench/python_overhead.py   # one GPU: the same host path, W = 1 (not yet run)

(Not as 2 ranks sharing one GPU: their persistent kernels time-slice it, and
each call then waits for context switches.)
"""
import argparse
import datetime
import os
import statistics
import time

import torch

import mkernel
import mkernel.torchrun

CALLS, ROUNDS, CTAS = 64, 51, 8


def per_call_us(fn):
    fn()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        rounds.append((time.perf_counter() - t0) / CALLS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(rounds)


def tp_rows():
    """The tensor-parallel ops from Python vs their plan's C ABI call (each call is a collective: all
    ranks make the same calls; 128 rows per rank, n = k = 64: the GPU keeps up)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    comm = mkernel.init()
    with mkernel.torchrun.reported(comm):  # a stopped wait says which (role, block, signal, peer)
        return _tp_rows(comm)


def _tp_rows(comm):
    import torch.distributed as dist
    from mkernel._lib import lib

    w = comm.world
    key = comm._uid
    x = torch.randn(128 * w, 64, device="cuda").bfloat16()   # gemm_rs a [m, k_local]
    xl = torch.randn(128, 64, device="cuda").bfloat16()      # ag_gemm a_local [m_local, k]
    b = torch.randn(64, 64, device="cuda").bfloat16()
    rs_out = torch.empty(128, 64, device="cuda", dtype=torch.bfloat16)
    ag_out = torch.empty(128 * w, 64, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.current_stream().cuda_stream
    ar_out = torch.empty(128 * w, 64, device="cuda", dtype=torch.bfloat16)
    rs_plan, ag_plan = mkernel.GemmRs(comm, 128 * w, 64, 64), mkernel.AgGemm(comm, 128, 64, 64)
    ar_plan = mkernel.GemmAr(comm, 128 * w, 64, 64)
    rows = [
        ("mkernel.gemm_rs(a, b, comm, out=out)  (eager, validated)",
         per_call_us(lambda: mkernel.gemm_rs(x, b, comm, out=rs_out))),
        ("mkernel.gemm_rs(a, b, comm)  (allocates out)", per_call_us(lambda: mkernel.gemm_rs(x, b, comm))),
        ("torch.ops.mkernel.gemm_rs_out  (dispatcher)", per_call_us(lambda: torch.ops.mkernel.gemm_rs_out(x, b, key, rs_out))),
        ("GemmRs plan run via the C ABI (ctypes, no Python checks)",
         per_call_us(lambda: lib.mk_gemm_rs_run(rs_plan._h, x.data_ptr(), b.data_ptr(), rs_out.data_ptr(), stream))),
        ("mkernel.gemm_ar(a, b, comm, out=out)  (eager, validated)",
         per_call_us(lambda: mkernel.gemm_ar(x, b, comm, out=ar_out))),
        ("GemmAr plan run via the C ABI (ctypes, no Python checks)",
         per_call_us(lambda: lib.mk_gemm_ar_run(ar_plan._h, x.data_ptr(), b.data_ptr(), ar_out.data_ptr(), stream))),
        ("mkernel.ag_gemm(a_local, b, comm, out=out)  (eager, validated)",
         per_call_us(lambda: mkernel.ag_gemm(xl, b, comm, out=ag_out))),
        ("AgGemm plan run via the C ABI (ctypes, no Python checks)",
         per_call_us(lambda: lib.mk_ag_gemm_run(ag_plan._h, xl.data_ptr(), b.data_ptr(), ag_out.data_ptr(), None,
                                                stream))),
        # The standalone collectives (the same plans' collective entry points).
        ("mkernel.all_gather(a_local, comm, out=out)  (eager, validated)",
         per_call_us(lambda: mkernel.all_gather(xl, comm, out=ag_out))),
        ("AgGemm all_gather via the C ABI (ctypes, no Python checks)",
         per_call_us(lambda: lib.mk_ag_gemm_all_gather(ag_plan._h, xl.data_ptr(), ag_out.data_ptr(), stream))),
        ("mkernel.reduce_scatter(x, comm, out=out)  (eager, validated)",
         per_call_us(lambda: mkernel.reduce_scatter(x, comm, out=rs_out))),
        ("GemmRs reduce_scatter via the C ABI (ctypes, no Python checks)",
         per_call_us(lambda: lib.mk_gemm_rs_reduce_scatter(rs_plan._h, x.data_ptr(), rs_out.data_ptr(), stream))),
        ("mkernel.all_reduce(x, comm, out=out)  (eager, validated)",
         per_call_us(lambda: mkernel.all_reduce(x, comm, out=ar_out))),
        ("GemmAr all_reduce via the C ABI (ctypes, no Python checks)",
         per_call_us(lambda: lib.mk_gemm_ar_all_reduce(ar_plan._h, x.data_ptr(), ar_out.data_ptr(), stream))),
    ]
    # Ring attention, tiny (B 1, S_local 128, 1 head, D 64): the eager call (validated, cached plan) against
    # its plan's C ABI run.
    q, k, v = (torch.randn(1, 128, 1, 64, device="cuda").bfloat16() for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(1, 1, 128, device="cuda")
    ring_plan = mkernel.RingAttention(comm, 1, 128, 1, 1, 64, False)
    rows += [
        ("mkernel.ring_attention(q, k, v, comm, out=, lse=)  (eager, validated)",
         per_call_us(lambda: mkernel.ring_attention(q, k, v, comm, out=o, lse=lse))),
        ("RingAttention plan run via the C ABI (ctypes, no Python checks)",
         per_call_us(lambda: lib.mk_ring_attn_run(ring_plan._h, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                                  lse.data_ptr(), stream))),
    ]
    torch.cuda.synchronize()
    dist.barrier()
    return [(f"[{w} ranks] " + name, us) for name, us in rows]


def attention_rows(breakdown=False):
    """mkernel.attention (one GPU, tiny: B 1, S 128, 1 head, D 64) against its C ABI call; with breakdown,
    also the pieces of the eager call's fast path."""
    from mkernel._lib import lib
    q, k, v = (torch.randn(1, 128, 1, 64, device="cuda").bfloat16() for _ in range(3))
    o, lse = torch.empty_like(q), torch.empty(1, 1, 128, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr())
    rows = [
        ("mkernel.attention(q, k, v, out=, lse=)  (eager, validated)",
         per_call_us(lambda: mkernel.attention(q, k, v, out=o, lse=lse))),
        ("mk_attention_fwd via the C ABI (ctypes, no Python checks)",
         per_call_us(lambda: lib.mk_attention_fwd(*ptrs, 1, 128, 128, 1, 1, 64, 0, 0.0, 0, stream))),
        # Causal calls claim their units from a counter in per-call scratch (pool allocation, memset, free):
        # the same call with the units walked statically (MK_ATTN_UNITS, read per call) is the difference.
        ("mk_attention_fwd causal via the C ABI (claimed units: scratch, memset)",
         per_call_us(lambda: lib.mk_attention_fwd(*ptrs, 1, 128, 128, 1, 1, 64, 1, 0.0, 0, stream))),
    ]
    saved = os.environ.get("MK_ATTN_UNITS")
    os.environ["MK_ATTN_UNITS"] = "static"
    try:
        rows.append(("mk_attention_fwd causal via the C ABI, MK_ATTN_UNITS=static",
                     per_call_us(lambda: lib.mk_attention_fwd(*ptrs, 1, 128, 128, 1, 1, 64, 1, 0.0, 0, stream))))
    finally:
        if saved is None:
            del os.environ["MK_ATTN_UNITS"]
        else:
            os.environ["MK_ATTN_UNITS"] = saved
    if breakdown:
        import timeit
        from mkernel import _attention as A
        dev = torch.cuda.current_device()
        assert A._hot(q, k, v, False, None, o, lse) is not None, "the fast path was not taken"
        rows += [
            ("piece: attention fast path (_hot)", per_call_us(lambda: A._hot(q, k, v, False, None, o, lse))),
            ("piece: mk_attention_fwd via ctypes, pointers read per call",
             per_call_us(lambda: lib.mk_attention_fwd(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                                      lse.data_ptr(), 1, 128, 128, 1, 1, 64, 0, 0.0, 0, stream))),
        ]
        for name, fn in {"attention _fast_io (5 tensors)": lambda: A._fast_io(q, k, v, o, lse, dev),
                         "attention shapes in _SEEN": lambda: (q.shape, k.shape, v.shape) in A._SEEN}.items():
            rows.append(("piece: " + name, min(timeit.repeat(fn, number=100000, repeat=3)) / 100000 * 1e6))
    return rows


def _ops_attr(name, *args):
    """A call of mkernel.ops.<name>(*args) where the package has it (an older package, timed beside this one,
    may not: then a no-op, and the row reads ~0)."""
    from mkernel import ops
    fn = getattr(ops, name, None)
    return (lambda: fn(*args)) if fn else (lambda: None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--breakdown", action="store_true", help="also time the pieces of a call")
    args = ap.parse_args()
    from mkernel._lib import lib
    a = torch.randn(64, 64, device="cuda").bfloat16()
    b = torch.randn(64, 64, device="cuda").bfloat16()
    out = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.current_stream().cuda_stream
    pa, pb, po = a.data_ptr(), b.data_ptr(), out.data_ptr()
    rows = [
        ("mkernel.gemm(a, b, out=out)  (eager, validated)", per_call_us(lambda: mkernel.gemm(a, b, out=out, num_compute_ctas=CTAS))),
        ("mkernel.gemm(a, b)  (allocates out)", per_call_us(lambda: mkernel.gemm(a, b, num_compute_ctas=CTAS))),
        ("torch.ops.mkernel.gemm_out  (dispatcher, as torch.compile calls it)",
         per_call_us(lambda: torch.ops.mkernel.gemm_out(a, b, out, CTAS))),
        # (the library's entry point through ctypes, as the plans' rows below; mkernel.gemm_ptr checks its
        # arguments' types and ranges since 2026-12-05, session 42: it is a row of its own)
        ("mk_gemm_bf16  (C ABI via ctypes, no Python checks)",
         per_call_us(lambda: lib.mk_gemm_bf16(pa, pb, po, 64, 64, 64, 0, CTAS, stream))),
        ("mkernel.gemm_ptr  (C ABI via ctypes, arguments checked)",
         per_call_us(lambda: mkernel.gemm_ptr(pa, pb, po, 64, 64, 64, 0, CTAS, stream))),
        ("torch.matmul(a, b.t(), out=out)  (reference: a torch op)", per_call_us(lambda: torch.matmul(a, b.t(), out=out))),
    ]
    rows += attention_rows(args.breakdown)
    if "WORLD_SIZE" in os.environ:  # under torchrun, any world size (with one rank: the same host path, W = 1)
        try:
            rows += tp_rows()
        except Exception as e:  # e.g. an op that needs 2 ranks: say so in the table, keep the other rows
            rows.append((f"tensor-parallel rows failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}", float("nan")))
    if args.breakdown:
        import timeit
        pieces = {
            "a.dtype": lambda: a.dtype, "a.is_cuda": lambda: a.is_cuda, "a.shape": lambda: a.shape,
            "a.stride()": lambda: a.stride(), "a.get_device()": lambda: a.get_device(),
            "a.data_ptr()": lambda: a.data_ptr(), "a.requires_grad": lambda: a.requires_grad,
            "torch._C._cuda_getDevice()": lambda: torch._C._cuda_getDevice(),
            "raw stream": lambda: torch._C._cuda_getCurrentRawStream(0),
            "torch.compiler.is_compiling()": lambda: torch.compiler.is_compiling(),
            "torch.is_grad_enabled()": lambda: torch.is_grad_enabled(),
            "capture query (torch._C._cuda_isCurrentStreamCapturing)": _ops_attr("_capturing"),
            "ops.modes_on()": _ops_attr("modes_on"),
            "ops.traced(op, a, b, out)": _ops_attr("traced", "mkernel.gemm", a, b, out),
            "ops.out_grad_refused(op, out)": _ops_attr("out_grad_refused", "mkernel.gemm", out),
            "ctypes no-op (mk_abi_version)": lambda: lib.mk_abi_version(),
            "ctypes mk_gemm_bf16 (launch)": lambda: lib.mk_gemm_bf16(pa, pb, po, 64, 64, 64, 0, CTAS, stream),
            "ctypes mk_gemm_bf16 (launch, GIL held: PyDLL)": lambda: py_gemm(pa, pb, po, 64, 64, 64, 0, CTAS, stream),
        }
        import ctypes
        from mkernel._lib import path as lib_path
        from mkernel._ops_c import _OPS
        py_gemm = ctypes.PyDLL(lib_path).mk_gemm_bf16
        py_gemm.argtypes, py_gemm.restype = _OPS["mk_gemm_bf16"], ctypes.c_int
        for name, fn in pieces.items():
            if "gemm" in name:
                us = per_call_us(fn)
            else:
                us = min(timeit.repeat(fn, number=100000, repeat=3)) / 100000 * 1e6
            rows.append(("piece: " + name, us))
            torch.cuda.synchronize()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    lines = [f"# Python-call overhead ({stamp}, {torch.cuda.get_device_name()}, torch {torch.__version__})", "",
             "- command: `" + (f"torchrun --standalone --nproc_per_node={os.environ['WORLD_SIZE']} "
                               if "WORLD_SIZE" in os.environ else "python3 ") +
             "bench/python_overhead.py`", "",
             "| call | host us per call |", "|---|---|"]
    lines += [f"| {name} | {us:.2f} |" for name, us in rows]
    lines += ["", f"Median over {ROUNDS} rounds of {CALLS} back-to-back calls, GEMM 64x64x64 bf16 on {CTAS} compute CTAs "
              "(the GPU keeps up; no host waits). Target: mkernel.gemm under 10 us per call. C++ baseline: mkbench "
              "gemm's host-cost table (same call, same settings)."]
    text = "\n".join(lines) + "\n"
    if int(os.environ.get("RANK", "0")) != 0:
        return
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"python-overhead-{stamp}.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
