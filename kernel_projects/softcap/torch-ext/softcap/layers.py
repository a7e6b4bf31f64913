"""Layer forward for `kernels.kernelize`: replaces the forward of a module with a `cap` attribute."""

import torch
import torch.nn as nn

from ._functional import softcap


class SoftCap(nn.Module):
    cap: float

    can_torch_compile = True
    has_backward = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softcap(x, self.cap)
