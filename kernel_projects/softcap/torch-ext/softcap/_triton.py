"""Fused Triton softcap, registered as a custom op; None where Triton is not installed."""

import torch

from ._ops import add_op_namespace_prefix

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

triton_softcap = None

if triton is not None:

    @triton.jit
    def _softcap_kernel(x_ptr, out_ptr, n, cap, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
        # tanh(z) = 1 - 2 / (exp(2z) + 1): exact at both tails, no overflow to NaN.
        t = 1.0 - 2.0 / (tl.exp(2.0 * x / cap) + 1.0)
        tl.store(out_ptr + offsets, (t * cap).to(out_ptr.dtype.element_ty), mask=mask)

    @torch.library.custom_op(add_op_namespace_prefix("softcap"), mutates_args=())
    def triton_softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        if n:
            _softcap_kernel[(triton.cdiv(n, 4096),)](x, out, n, cap, BLOCK=4096)
        return out

    @triton_softcap.register_fake
    def _(x: torch.Tensor, cap: float) -> torch.Tensor:
        return torch.empty_like(x)
