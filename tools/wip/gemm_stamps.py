"""EXPERIMENT (tools/wip/gemm-stamps.patch): where a tile's time goes in the GEMM engine. Needs a library
built with the patch (MK_LIBRARY). Per CTA and tile, consumer warpgroup 0's leader stamps clock64 at the
unit's begin, when its first stage landed, when its K loop is done and when its epilogue is issued.

    MK_LIBRARY=.carry/lib_stamps/libmkernel.so python3 tools/wip/gemm_stamps.py M N K [SECONDS]

Prints medians (cycles) over CTAs and tiles of the last call (after SECONDS of back-to-back calls, 0: a
few calls only).
"""
import ctypes
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import mkernel  # noqa: E402

m, n, k = (int(x) for x in sys.argv[1:4])
seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
lib = ctypes.CDLL(os.environ["MK_LIBRARY"], mode=ctypes.RTLD_GLOBAL)
TILES, CTAS = 32, 160
buf = (ctypes.c_ulonglong * (CTAS * TILES * 4))()
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
for _ in range(10):
    mkernel.gemm(a, b)
torch.cuda.synchronize()
if seconds > 0:
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    st.record()
    for _ in range(5):
        mkernel.gemm(a, b)
    en.record()
    torch.cuda.synchronize()
    calls = max(5, int(seconds * 1e3 / (st.elapsed_time(en) / 5)))
    for _ in range(calls):
        mkernel.gemm(a, b)
torch.cuda.synchronize()
assert lib.mk_exp_stamps(buf, len(buf)) == 0
sms = torch.cuda.get_device_properties(0).multi_processor_count
tiles = ((m + 127) // 128) * ((n + 255) // 256)
full = min(TILES, tiles // sms)  # tiles every CTA ran in this call (later slots may hold an earlier call's)
kblocks = k // 64
wait0, loop, epi, gap = [], [], [], []
for c in range(sms):
    s = [[buf[(c * TILES + t) * 4 + i] for i in range(4)] for t in range(full)]
    for t in range(full):
        wait0.append(s[t][1] - s[t][0])
        loop.append(s[t][2] - s[t][1])
        epi.append(s[t][3] - s[t][2])
        if t + 1 < full:
            gap.append(s[t + 1][0] - s[t][3])
med = statistics.median
tot = med(wait0) + med(loop) + med(epi) + (med(gap) if gap else 0)
print(f"M={m} N={n} K={k}, {full} tiles per CTA used, {'sustained %.0f s' % seconds if seconds else 'cold'}; "
      f"median cycles per tile: first-stage wait {med(wait0)} (tile 0: {med(wait0[::full])}), "
      f"K loop {med(loop)} ({med(loop) / kblocks:.0f} per K block), epilogue {med(epi)}, "
      f"to next unit {med(gap) if gap else '-'}; non-K-loop share {(tot - med(loop)) / tot * 100:.1f}%; "
      f"K loop p10/p90 {sorted(loop)[len(loop) // 10]}/{sorted(loop)[9 * len(loop) // 10]}, "
      f"epilogue p90 {sorted(epi)[9 * len(epi) // 10]}")
