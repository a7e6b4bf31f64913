"""Tanh soft-capping, `cap * tanh(x / cap)` (Gemma-style logit and attention-score capping).

Pure PyTorch, so one build serves every backend; on CUDA with Triton available
one fused kernel replaces the three elementwise ops."""

from . import layers
from ._functional import softcap

__all__ = ["softcap", "layers"]
