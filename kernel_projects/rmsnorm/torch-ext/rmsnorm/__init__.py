"""RMSNorm and fused residual-add + RMSNorm (CUDA and CPU), as torch custom ops."""

import torch

from . import layers
from ._ops import add_op_namespace_prefix, ops

__all__ = ["rms_norm", "fused_add_rms_norm", "layers"]

# The overloads themselves: the packet (`ops.rms_norm`) matches the arguments
# against its overloads on every call, ~0.4 us of host time that small inputs
# wait for (measured on an H100 host).
_rms_norm = ops.rms_norm.default
_fused_add_rms_norm = ops.fused_add_rms_norm.default


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """`x * rsqrt(mean(x**2, -1) + eps) * weight`, accumulated in float32, rounded once to `x.dtype`."""
    return _rms_norm(x, weight, eps)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns `(rms_norm(x + residual), x + residual)`; the sum is rounded to `x.dtype` before the norm."""
    return _fused_add_rms_norm(x, residual, weight, eps)


def _check_fake(x: torch.Tensor, weight: torch.Tensor | None) -> None:
    torch._check(x.dim() >= 1, lambda: "rms_norm: input must have at least one dimension")
    if weight is not None:
        torch._check(weight.dtype == x.dtype, lambda: "rms_norm: weight dtype differs from input dtype")
        torch._check(weight.shape == (x.shape[-1],), lambda: "rms_norm: weight must have shape [hidden]")


@torch.library.register_fake(add_op_namespace_prefix("rms_norm"))
def _rms_norm_fake(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    _check_fake(x, weight)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.register_fake(add_op_namespace_prefix("fused_add_rms_norm"))
def _fused_add_rms_norm_fake(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    _check_fake(x, weight)
    torch._check(residual.shape == x.shape, lambda: "fused_add_rms_norm: residual shape differs from input shape")
    return (
        torch.empty(x.shape, dtype=x.dtype, device=x.device),
        torch.empty(x.shape, dtype=x.dtype, device=x.device),
    )
