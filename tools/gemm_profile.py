"""A few calls of one bf16 GEMM (out[m, n] = a[m, k] b[n, k]^T) at one shape, for a profiler (ncu) on the device:

    ncu --kernel-name regex:"gemm|nvjet|sm90|cutlass" --launch-skip 4 --launch-count 1 \
        python3 tools/gemm_profile.py [M N K [BACKEND]]

BACKEND: mk (mkernel.gemm, the default) or cublas (torch.matmul, the same layout). Prints the CUDA-event
time of 5 back-to-back calls on the same inputs (unprofiled when run without ncu). SECONDS > 0: calls
back to back for that long instead (sustained clocks; sample them beside with nvidia-smi), then the mean.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import mkernel  # noqa: E402

args = sys.argv[1:] or ["4096", "14336", "8192"]
m, n, k = (int(x) for x in args[:3])
backend = args[3] if len(args) > 3 else "mk"
seconds = float(args[4]) if len(args) > 4 else 0.0
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
if backend == "mk":
    def call():
        mkernel.gemm(a, b)
elif backend == "cublas":
    def call():
        torch.matmul(a, b.t())
else:
    sys.exit(f"unknown backend {backend!r} (mk or cublas)")
for _ in range(4):
    call()
torch.cuda.synchronize()
st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
calls = 5
if seconds > 0:  # how many calls fill the time, from a first timed batch
    st.record()
    for _ in range(5):
        call()
    en.record()
    torch.cuda.synchronize()
    calls = max(5, int(seconds * 1e3 / (st.elapsed_time(en) / 5)))
st.record()
for _ in range(calls):
    call()
en.record()
torch.cuda.synchronize()
ms = st.elapsed_time(en) / calls
print(f"{backend}: {calls} calls, M={m} N={n} K={k}: {ms:.3f} ms, {2 * m * n * k / ms / 1e9:.0f} TFLOP/s")
