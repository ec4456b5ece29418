import sys, timeit, torch
import mkernel, mkernel.tp, mkernel.tp_ar
from mkernel import tp
sys.path.insert(0, "/work/main/tests/python")
from test_package import FakeComm
comm = FakeComm(world=2); comm._device = -1
tp._get_device = lambda: -1
a, b = torch.zeros(512, 384, dtype=torch.bfloat16), torch.zeros(256, 384, dtype=torch.bfloat16)
out = torch.empty(512, 256, dtype=torch.bfloat16)
tp._HOT[("gemm_ar", comm._uid, a.shape, b.shape)] = (lambda *t: None, (512, 256))
f = lambda: tp._hot("gemm_ar", comm, out, a, b)
assert f() is out
n = 100000
print(round(min(timeit.repeat(f, number=n, repeat=7)) / n * 1e6, 3), "us")
