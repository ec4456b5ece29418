"""A few calls of mkernel.attention at one shape, for a profiler (ncu) on the device machine:

    ncu --kernel-name regex:attn --launch-skip 2 --launch-count 1 python3 tools/attn_profile.py [B S H HKV D CAUSAL]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import mkernel  # noqa: E402

b, s, h, hkv, d, causal = (int(x) for x in (sys.argv[1:] or ["1", "16384", "32", "32", "128", "0"]))
q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
k, v = (torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
for _ in range(4):
    mkernel.attention(q, k, v, causal=bool(causal))
torch.cuda.synchronize()
st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
st.record()
for _ in range(5):
    mkernel.attention(q, k, v, causal=bool(causal))
en.record()
torch.cuda.synchronize()
ms = st.elapsed_time(en) / 5
fl = 4 * b * h * s * s * d / (2 if causal else 1)
print(f"B={b} S={s} H={h} Hkv={hkv} D={d} causal={causal}: {ms:.3f} ms, {fl / ms / 1e9:.0f} TFLOP/s")
