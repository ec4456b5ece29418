"""A few calls of mkernel.attention at one shape, for a profiler (ncu) on the device machine:

    ncu --kernel-name regex:attn --launch-skip 2 --launch-count 1 python3 tools/attn_profile.py [B S H HKV D CAUSAL [BACKEND]]

BACKEND: mk (mkernel.attention, the default), cudnn or flash (torch SDPA's backends, for the same profile of
the baseline; their kernels have other names: e.g. --kernel-name regex:"attention|sdpa|fmha|flash").
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from attention_bench import mkernel, repeated_kv, sdpa, sdpa_takes_gqa, torch  # noqa: E402  (its SDPA call)

args = sys.argv[1:] or ["1", "16384", "32", "32", "128", "0"]
b, s, h, hkv, d, causal = (int(x) for x in args[:6])
backend = args[6] if len(args) > 6 else "mk"
q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
k, v = (torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
if backend == "mk":
    def call():
        mkernel.attention(q, k, v, causal=bool(causal))
else:
    from torch.nn.attention import SDPBackend
    run = sdpa({"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend])
    kvr = repeated_kv([(q, k, v)], h) if hkv != h and not sdpa_takes_gqa() else None  # (torch < 2.5: no enable_gqa)

    def call():
        run(q, k, v, bool(causal), kvr)
for _ in range(4):
    call()
torch.cuda.synchronize()
st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
st.record()
for _ in range(5):
    call()
en.record()
torch.cuda.synchronize()
ms = st.elapsed_time(en) / 5
fl = 4 * b * h * s * s * d / (2 if causal else 1)
print(f"{backend}: B={b} S={s} H={h} Hkv={hkv} D={d} causal={causal}: {ms:.3f} ms, {fl / ms / 1e9:.0f} TFLOP/s")
