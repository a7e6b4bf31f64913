"""RMSNorm against torch.nn.functional.rms_norm, in the form `kernels benchmark`
runs (and `publisher bench`): each `benchmark_<workload>` calls the kernel as a
user does and leaves its output in `self.out`; `verify_<workload>` returns
F.rms_norm's answer for the same inputs, which `self.out` must match
(allclose, atol 1e-2) and which is timed beside the kernel.

    kernels benchmark your-hf-org/rmsnorm --version 1
    publisher bench .                     # this folder's build/, each variant this machine runs

Shapes: a prefill-sized batch (4096 tokens of hidden size 4096, 32 MiB in
bf16), bound by memory bandwidth on a GPU, and a decode-sized one (8 tokens),
bound by the host's time per call. benchmarks/study.py is the longer study
(15 shapes, torch.compile, CUDA graphs, copy bandwidth) on a CUDA GPU.
"""

import torch
import torch.nn.functional as F
from kernels.benchmark import Benchmark

EPS = 1e-6


def bf16_inputs(tokens, hidden, device, count=1):
    """bf16 inputs in [-1, 1) and weights in [0.7, 0.8): every output stays below 2, where one bfloat16
    step (2**-7) is within the check's atol of 1e-2, so rounding once (the kernel) or twice (F.rms_norm
    normalises, rounds, then scales) agrees."""
    xs = [torch.rand(tokens, hidden, device=device, dtype=torch.bfloat16) * 2 - 1 for _ in range(count)]
    weight = torch.rand(hidden, device=device, dtype=torch.bfloat16) * 0.1 + 0.7
    return xs, weight


class RMSNormBenchmark(Benchmark):
    seed = 0

    def setup_bf16_4096x4096(self):
        (self.x,), self.weight = bf16_inputs(4096, 4096, self.device)

    def benchmark_bf16_4096x4096(self):
        self.out = self.kernel.rms_norm(self.x, self.weight, EPS)

    def verify_bf16_4096x4096(self) -> torch.Tensor:
        return F.rms_norm(self.x, (self.x.shape[-1],), self.weight, EPS)

    def setup_bf16_8x4096(self):
        (self.x,), self.weight = bf16_inputs(8, 4096, self.device)

    def benchmark_bf16_8x4096(self):
        self.out = self.kernel.rms_norm(self.x, self.weight, EPS)

    def verify_bf16_8x4096(self) -> torch.Tensor:
        return F.rms_norm(self.x, (self.x.shape[-1],), self.weight, EPS)

    def setup_fp32_4096x4096(self):
        self.x = torch.randn(4096, 4096, device=self.device, dtype=torch.float32)
        self.weight = torch.randn(4096, device=self.device, dtype=torch.float32) * 0.5 + 1

    def benchmark_fp32_4096x4096(self):
        self.out = self.kernel.rms_norm(self.x, self.weight, EPS)

    def verify_fp32_4096x4096(self) -> torch.Tensor:
        return F.rms_norm(self.x, (self.x.shape[-1],), self.weight, EPS)


class FusedAddRMSNormBenchmark(Benchmark):
    """The residual add and the norm in one pass, against adding then F.rms_norm."""

    seed = 0

    def setup(self):
        # x + residual rounds to bf16 in [-1, 1) before the norm (as the kernel rounds the sum)
        (self.x, self.residual), self.weight = bf16_inputs(4096, 4096, self.device, count=2)
        self.x, self.residual = self.x / 2, self.residual / 2

    def benchmark_bf16_4096x4096(self):
        self.out = self.kernel.fused_add_rms_norm(self.x, self.residual, self.weight, EPS)[0]

    def verify_bf16_4096x4096(self) -> torch.Tensor:
        return F.rms_norm(self.x + self.residual, (self.x.shape[-1],), self.weight, EPS)
