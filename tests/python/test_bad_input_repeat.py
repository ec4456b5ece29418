"""Bad input that a repeated call (the steady-state path) or a hand-made plan's method gets is refused as the first
call's is, with the same clear MkernelError before the library: the library refuses an out that overlaps an input
or starts unaligned too, but at launch and on its own rank alone, after the other ranks of the collective launched
(they wait for this one until MK_TIMEOUT_MS). Also: init's device, the ring plan's run with a non-tensor, the
errors that name the call and say what was passed, close_plans' argument.

No GPU: test_bad_input's `cuda_cpu` fixture, fake_gpu (CPU tensors stand in for CUDA ones); every launch is a test
double that raises `Reached`."""
import pytest

from torchops import torch_ops  # noqa: E402

torch = torch_ops()  # (torch >= 2.4, or the module skips saying why)

import mkernel  # noqa: E402
from mkernel import _ring_attention, tp, tp_ar  # noqa: E402
from test_bad_input import Reached, _empty, _misaligned, fake_gpu  # noqa: E402

M, N, K = 256, 128, 128


@pytest.fixture
def cuda_cpu(monkeypatch):
    return fake_gpu(monkeypatch)


def _launch(*args):
    raise Reached(f"launched with {len(args)} tensors")


def _repeat(comm, op, a, b, out_shape):
    """Makes `op`'s steady-state entry for these shapes, as a first call that launched would (tp._hot_add)."""
    tp._hot_add(op, mkernel._tp_meta.register(comm), a, b, _launch, out_shape)


@pytest.fixture
def hot(monkeypatch):
    monkeypatch.setattr(tp, "_HOT", {})
    monkeypatch.setattr(_ring_attention, "_HOT", tp._HOT)
    return tp._HOT


def test_a_repeated_tp_call_sends_an_overlapping_or_unaligned_out_to_the_full_checks(cuda_cpu, hot):
    comm = cuda_cpu
    x = _empty(M, N)
    _repeat(comm, "reduce_scatter", x, None, (M // 2, N))
    with pytest.raises(Reached):  # the entry is used: a well-formed repeat launches at once
        mkernel.reduce_scatter(x, comm, out=_empty(M // 2, N))
    with pytest.raises(mkernel.MkernelError, match="reduce_scatter: out overlaps x"):
        mkernel.reduce_scatter(x, comm, out=x[:M // 2])
    with pytest.raises(mkernel.MkernelError, match="out must start at a 16-byte aligned address"):
        mkernel.reduce_scatter(x, comm, out=_misaligned(M // 2, N))
    with pytest.raises(mkernel.MkernelError, match="x must start at a 16-byte aligned address"):
        mkernel.reduce_scatter(_misaligned(M, N), comm)

    a, b = _empty(M, K), _empty(N, K)
    _repeat(comm, "gemm_rs", a, b, (M // 2, N))
    with pytest.raises(mkernel.MkernelError, match="gemm_rs: out overlaps b"):
        mkernel.gemm_rs(a, b, comm, out=b.view(-1)[:M // 2 * N].view(M // 2, N))

    _repeat(comm, "all_reduce", x, None, (M, N))
    with pytest.raises(Reached):  # in place, the very same tensor: allowed, as on the first call
        mkernel.all_reduce(x, comm, out=x)
    buf = _empty(M * N + 64)  # an out 64 elements past x, over most of it
    with pytest.raises(mkernel.MkernelError, match="all_reduce: out overlaps x"):
        mkernel.all_reduce(buf[:M * N].view(M, N), comm, out=buf[64:].view(M, N))


def test_a_repeated_ring_attention_call_sends_an_overlapping_out_or_lse_to_the_full_checks(cuda_cpu, hot):
    comm = cuda_cpu
    q, k, v = _empty(1, 128, 2, 64), _empty(1, 128, 2, 64), _empty(1, 128, 2, 64)
    hot[("ring_attention", mkernel._tp_meta.register(comm), q.shape, k.shape, v.shape, False, 0.0)] = _launch
    out, lse = _empty(1, 128, 2, 64), _empty(1, 2, 128, dtype=torch.float32)
    with pytest.raises(Reached):
        mkernel.ring_attention(q, k, v, comm, out=out, lse=lse)
    with pytest.raises(mkernel.MkernelError, match="ring_attention: out overlaps k"):
        mkernel.ring_attention(q, k, v, comm, out=k, lse=lse)
    lse_in_out = out.view(-1)[:2 * 2 * 128].view(torch.float32).view(1, 2, 128)
    with pytest.raises(mkernel.MkernelError, match="ring_attention: lse overlaps out"):
        mkernel.ring_attention(q, k, v, comm, out=out, lse=lse_in_out)
    with pytest.raises(mkernel.MkernelError, match="ring_attention: out must start at a 16-byte aligned"):
        mkernel.ring_attention(q, k, v, comm, out=_misaligned(1, 128, 2, 64))


def _hand_made(cls, shape, monkeypatch):
    """A plan of `cls` for `shape` as its constructor leaves it, on a 2-rank communicator of this device; its
    launches raise Reached."""
    p = cls.__new__(cls)
    p._h, p._device, p.world, p.shape = 0x1234, -1, 2, shape
    for name in ("_launch", "_launch_all_gather", "_launch_reduce_scatter", "_launch_all_reduce"):
        monkeypatch.setattr(p, name, _launch, raising=False)
    return p


def test_the_hand_made_plans_methods_refuse_an_out_over_their_inputs(cuda_cpu, monkeypatch):
    x, a, b = _empty(M, N), _empty(M, K), _empty(N, K)
    rs = _hand_made(mkernel.GemmRs, (M, N, K), monkeypatch)
    with pytest.raises(mkernel.MkernelError, match=r"GemmRs.reduce_scatter: out overlaps x"):
        rs.reduce_scatter(x, out=x[:M // 2])
    with pytest.raises(mkernel.MkernelError, match=r"GemmRs.run: out overlaps a"):
        rs.run(a, b, out=a[:M // 2])
    with pytest.raises(mkernel.MkernelError, match=r"GemmRs.run: b must start at a 16-byte aligned"):
        rs.run(a, _misaligned(N, K))
    with pytest.raises(Reached):
        rs.run(a, b)
    ar = _hand_made(tp_ar.GemmAr, (M, N, K), monkeypatch)
    with pytest.raises(mkernel.MkernelError, match=r"GemmAr.run: out overlaps a"):
        ar.run(a, b, out=a)
    with pytest.raises(Reached):  # in place: allowed
        ar.all_reduce(x, out=x)
    buf = _empty(M * N + 64)
    with pytest.raises(mkernel.MkernelError, match=r"GemmAr.all_reduce: out overlaps x"):
        ar.all_reduce(buf[:M * N].view(M, N), out=buf[64:].view(M, N))
    g = _empty(M, K)
    ag = _hand_made(mkernel.AgGemm, (M // 2, N, K), monkeypatch)
    with pytest.raises(mkernel.MkernelError, match=r"AgGemm.all_gather: out overlaps a_local"):
        ag.all_gather(g[:M // 2], out=g)
    out = _empty(M, N)
    with pytest.raises(mkernel.MkernelError, match=r"AgGemm.run: gathered overlaps out"):
        ag.run(g[:M // 2].clone(), b, out=out, gathered=out.view(-1)[:M * K].view(M, K))
    with pytest.raises(mkernel.MkernelError, match=r"AgGemm.run: a_local must be a contiguous \[128, 128\]"):
        ag.run(g, b)


def test_ring_attention_errors_name_the_call_and_say_what_was_passed(cuda_cpu, monkeypatch):
    comm = cuda_cpu
    q = _empty(1, 128, 2, 64)
    plan = _hand_made(mkernel.RingAttention, (1, 128, 2, 2, 64), monkeypatch)
    plan.causal = False
    for args, name in (((None, q, q), "q"), ((q, None, q), "k"), ((q, q.clone(), None), "v")):
        with pytest.raises(mkernel.MkernelError, match=rf"^mkernel.RingAttention.run: {name} must be a torch.Tensor "
                                                       r"\(got NoneType\)"):
            plan.run(*args)
    with pytest.raises(mkernel.MkernelError, match=r"^mkernel.RingAttention.run: k must be bfloat16"):
        plan.run(q, q.float(), q.clone())
    with pytest.raises(mkernel.MkernelError, match=r"^mkernel.ring_attention: k must be bfloat16"):
        mkernel.ring_attention(q, q.float(), q.clone(), comm)
    with pytest.raises(mkernel.MkernelError, match=r"^mkernel.ring_attention: q must be a torch.Tensor"):
        mkernel.ring_attention(None, q, q.clone(), comm)
    with pytest.raises(mkernel.MkernelError, match=r"out must be a contiguous bf16 tensor shaped like q .*\(got a "
                                                   r"float32 tensor \(1, 128, 2, 64\), contiguous, on cpu\)"):
        mkernel.ring_attention(q, q.clone(), q.clone(), comm, out=torch.empty(1, 128, 2, 64))
    with pytest.raises(mkernel.MkernelError, match=r"lse must be a contiguous float32 tensor of shape \(1, 2, 128\) "
                                                   r".*\(got a list\)"):
        mkernel.attention(q, q.clone(), q.clone(), lse=[])


def test_close_plans_refuses_what_is_not_a_communicator():
    for bad in (object(), "x", 3):
        with pytest.raises(mkernel.MkernelError, match=r"close_plans: comm must be an mkernel.Communicator or None "
                                                       rf"\(got {type(bad).__name__}\)"):
            mkernel.close_plans(bad)


@pytest.mark.parametrize("device,error", [("0", r"device must be an int \(got str '0'\)"),
                                          (1.5, r"device must be an int \(got float 1.5\)"),
                                          (-2, r"device must be in \[-1, ")])
def test_init_names_a_device_that_is_not_a_device_number(monkeypatch, device, error):
    # A TypeError from comparing it with 0 before ("'<' not supported between instances of 'str' and 'int'"). Said
    # after the unique id's exchange, which counts the call on every rank (a rank that raised before it fell out of
    # step with rank 0 for good); a number out of range is the library's, which fails every rank at once.
    import torch.distributed as dist
    from mkernel import _torch_id

    made = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(_torch_id, "share_unique_id", lambda group, make: b"id")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)

    def communicator(rank, world, uid, dev):
        made.append(dev)
        raise Reached("the communicator is made")
    monkeypatch.setattr(mkernel, "Communicator", communicator)
    with pytest.raises(mkernel.MkernelError, match=r"^mkernel.init: " + error):
        mkernel.init(device=device)
    assert made == []
    for fine, dev in ((None, 3), (-1, 3), (1, 1)):  # (None: the current device, as -1)
        with pytest.raises(Reached):
            mkernel.init(device=fine)
        assert made.pop() == dev
