"""The torch that mkernel's tensor ops need: torch.library.custom_op (torch >= 2.4). Checked when an op module is
first imported, so an older torch gets this message instead of an AttributeError from a decorator."""


def require_custom_op(torch_module):
    """Raise ImportError naming the torch found where it lacks torch.library.custom_op."""
    library = getattr(torch_module, "library", None)
    if not hasattr(library, "custom_op"):
        version = getattr(torch_module, "__version__", "unknown")
        raise ImportError(f"mkernel's tensor ops need torch >= 2.4 (torch.library.custom_op); this torch is "
                          f"{version}. The communicator and the pointer-level ops (mkernel.gemm_ptr) need no torch.")


import torch  # noqa: E402  (this module is imported by the op modules only, which import torch anyway)

require_custom_op(torch)
