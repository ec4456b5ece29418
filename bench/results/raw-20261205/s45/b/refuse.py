import mkernel.torchrun
def run(comm, rank, world):
    raise AssertionError("reached run(): the NCCL refusal did not happen")
if __name__ == "__main__":
    mkernel.torchrun.main(run, backend="nccl")
