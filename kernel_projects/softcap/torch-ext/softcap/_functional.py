import torch

from ._triton import triton_softcap


def softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """`cap * tanh(x / cap)`, computed in at least float32 and returned in `x.dtype`."""
    if cap <= 0:
        raise ValueError(f"softcap: cap must be positive, got {cap}")
    fused = (
        triton_softcap is not None
        and x.is_cuda
        and x.is_contiguous()
        and not (torch.is_grad_enabled() and x.requires_grad)  # the Triton op has no backward
        and not torch.compiler.is_compiling()  # Inductor fuses the plain version itself
    )
    if fused:
        return triton_softcap(x, float(cap))
    wide = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return (torch.tanh(wide / cap) * cap).to(x.dtype)
