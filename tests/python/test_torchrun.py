"""mkernel.torchrun.reported: when a script's body raises, the rank's record of which device wait gave up
is printed and the exception goes on; nothing is printed when there is no record. Needs torch (the module
imports torch.distributed), not a GPU: fake communicators stand in."""
import pytest

pytest.importorskip("torch")

import mkernel  # noqa: E402
import mkernel.torchrun  # noqa: E402


class FakeComm:
    rank = 3

    def __init__(self, record):
        self.record = record

    def check(self):
        if self.record:
            raise mkernel.MkernelError(self.record)


def test_prints_the_device_record_and_reraises(capsys):
    rec = "rank 3 role Compute (block 7 thread 0) timed out after 10 ms waiting on signal 5 from peer 1"
    with pytest.raises(RuntimeError, match="launch failure"):
        with mkernel.torchrun.reported(FakeComm(rec)):
            raise RuntimeError("CUDA error: unspecified launch failure")
    assert f"rank 3: device: {rec}" in capsys.readouterr().out


def test_silent_without_a_record_and_the_rank_given_wins(capsys):
    with pytest.raises(ValueError):
        with mkernel.torchrun.reported(FakeComm(""), rank=0):
            raise ValueError("a bad input")
    assert "device:" not in capsys.readouterr().out
    rec = "rank 0 role Reduce (block 1 thread 0) stopped waiting on signal 2 from peer 1: abort raised by rank 1"
    with pytest.raises(ValueError):
        with mkernel.torchrun.reported(FakeComm(rec), rank=0):
            raise ValueError("x")
    assert f"rank 0: device: {rec}" in capsys.readouterr().out


def test_nothing_happens_when_the_body_succeeds(capsys):
    with mkernel.torchrun.reported(FakeComm("a record that must not print")):
        pass
    assert capsys.readouterr().out == ""


def test_nccl_with_ranks_sharing_a_gpu_is_refused_before_anything_starts(monkeypatch):
    # torchrun with MK_SHARE_GPUS=1 and more local ranks than GPUs: a backend with NCCL (the benchmarks' baselines)
    # would fail at its first collective with NCCL's "Duplicate GPU detected"; main says why before it starts.
    started = []
    monkeypatch.setenv("MK_SHARE_GPUS", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(mkernel.torchrun.torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(mkernel.torchrun.torch.cuda, "set_device", lambda d: started.append(("device", d)))
    def init_pg(b):
        started.append(("init", b))
        raise RuntimeError("stop here")  # (what follows needs a process group)
    monkeypatch.setattr(mkernel.torchrun.dist, "init_process_group", init_pg)
    with pytest.raises(SystemExit, match="2 local ranks would share 1 GPU.*uses NCCL"):
        mkernel.torchrun.main(lambda *a: None, backend="cpu:gloo,cuda:nccl")
    assert started == []
    # gloo (the default, what the checks use) shares the GPU: the rank takes GPU 0 and goes on.
    with pytest.raises(RuntimeError, match="stop here"):
        mkernel.torchrun.main(lambda *a: None)
    assert started == [("device", 0), ("init", "gloo")]


def test_a_closed_communicator_leaves_the_bodys_exception_alone(capsys):
    # Its check() would raise "this communicator is closed" inside the handler and replace the body's exception.
    comm = mkernel.Communicator.__new__(mkernel.Communicator)  # as after close(): no handle
    assert comm.closed
    with pytest.raises(mkernel.MkernelError, match="closed"):
        comm.check()
    with pytest.raises(AssertionError, match="the body's"):
        with mkernel.torchrun.reported(comm):
            raise AssertionError("the body's")
    assert capsys.readouterr().out == ""


def test_main_asks_for_eager_module_loading_unless_the_caller_chose(monkeypatch):
    # Kernels loaded on first use block the proxy's copies while a kernel waits: main sets CUDA_MODULE_LOADING=EAGER
    # before it starts CUDA (set_device), as tools/mkrun does; a value the caller set stays.
    seen = []
    monkeypatch.setenv("CUDA_MODULE_LOADING", "as before")  # (records the variable's state, so the test restores it)
    monkeypatch.delenv("MK_SHARE_GPUS", raising=False)
    monkeypatch.setattr(mkernel.torchrun.torch.cuda, "set_device",
                        lambda d: seen.append(mkernel.torchrun.os.environ.get("CUDA_MODULE_LOADING")))
    def stop(b):
        raise RuntimeError("stop here")
    monkeypatch.setattr(mkernel.torchrun.dist, "init_process_group", stop)
    for given, want in ((None, "EAGER"), ("LAZY", "LAZY")):
        if given is None:
            monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
        else:
            monkeypatch.setenv("CUDA_MODULE_LOADING", given)
        with pytest.raises(RuntimeError, match="stop here"):
            mkernel.torchrun.main(lambda *a: None)
        assert seen[-1] == want


@pytest.mark.parametrize("value", ["2", "maybe", "yes please"])
def test_a_bad_mk_share_gpus_is_refused_by_the_librarys_parser_before_the_gpu_is_chosen(monkeypatch, value):
    # main read MK_SHARE_GPUS itself (anything but 1/true/yes/on was false, without a word); the library's bool
    # parser refuses a bad value, naming the variable, before torch.cuda.set_device.
    started = []
    monkeypatch.setenv("MK_SHARE_GPUS", value)
    monkeypatch.setattr(mkernel.torchrun.torch.cuda, "set_device", lambda d: started.append(d))
    with pytest.raises(mkernel.MkernelError, match=f"MK_SHARE_GPUS='{value}' is not a boolean"):
        mkernel.torchrun.main(lambda *a: None)
    assert started == []


@pytest.mark.parametrize("value,shared", [("on", True), ("TRUE", True), ("0", False), ("off", False), (None, False)])
def test_mk_share_gpus_takes_the_librarys_spellings(monkeypatch, value, shared):
    seen = []
    if value is None:
        monkeypatch.delenv("MK_SHARE_GPUS", raising=False)
    else:
        monkeypatch.setenv("MK_SHARE_GPUS", value)
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setattr(mkernel.torchrun.torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(mkernel.torchrun.torch.cuda, "set_device", lambda d: seen.append(d))
    def stop(b):
        raise RuntimeError("stop")
    monkeypatch.setattr(mkernel.torchrun.dist, "init_process_group", stop)
    with pytest.raises(RuntimeError, match="stop"):
        mkernel.torchrun.main(lambda *a: None)
    assert seen == [1 if shared else 3]


@pytest.mark.parametrize("name,value", [("LOCAL_RANK", "one"), ("LOCAL_RANK", "-1"), ("LOCAL_WORLD_SIZE", "2.0")])
def test_torchrun_names_a_bad_launcher_variable(monkeypatch, name, value):
    monkeypatch.setenv("MK_SHARE_GPUS", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setenv(name, value)
    monkeypatch.setattr(mkernel.torchrun.torch.cuda, "set_device", lambda d: pytest.fail("a device was chosen"))
    with pytest.raises(SystemExit, match=rf"mkernel.torchrun: {name}='{value}' is not a non-negative integer"):
        mkernel.torchrun.main(lambda *a: None)
