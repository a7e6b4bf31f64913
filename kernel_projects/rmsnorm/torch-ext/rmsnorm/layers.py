"""Drop-in forwards for `kernels.kernelize`: they replace the `forward` of a module
that has `weight` and `variance_epsilon` (transformers' LlamaRMSNorm and its many
copies), so they keep no state of their own and define no constructor."""

import torch
import torch.nn as nn

from ._ops import ops


class RMSNorm(nn.Module):
    """Same result as transformers' `LlamaRMSNorm.forward`, one kernel instead of six."""

    weight: torch.Tensor
    variance_epsilon: float

    can_torch_compile = True
    has_backward = False

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if self.weight.dtype == hidden_states.dtype:
            return ops.rms_norm(hidden_states, self.weight, self.variance_epsilon)
        # transformers multiplies in the weight's dtype when it differs (e.g. fp32 weight, bf16 activations).
        return self.weight * ops.rms_norm(hidden_states, None, self.variance_epsilon)
