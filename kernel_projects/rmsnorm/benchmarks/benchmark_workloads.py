"""RMSNorm workloads in the form `kernels benchmark` (and `publisher bench`) runs: each
`benchmark_<workload>` calls the kernel on the tensors `setup_<workload>` made;
`verify_<workload>` is the reference, torch.nn.functional.rms_norm, which `self.out`
must match. (study.py beside this file is the longer study: graph timings, copy
ceiling, torch.compile; not named benchmark*.py, which `kernels benchmark` would refuse.)

    kernels benchmark ./         # this folder's build/ (after `publisher build --local`)
    publisher bench .            # this folder's build/: each variant this machine runs

The published kernel, from a snapshot of its version branch (`kernels benchmark your-hf-org/rmsnorm`
cannot load a third-party kernel in kernels 0.17.2):

    hf download your-hf-org/rmsnorm --repo-type kernel --revision v1 --local-dir rmsnorm-v1
    kernels benchmark ./rmsnorm-v1"""

import torch
import torch.nn.functional as F
from kernels.benchmark import Benchmark

EPS = 1e-6


class RMSNormWorkloads(Benchmark):
    seed = 0

    def _make(self, rows: int, hidden: int, dtype: torch.dtype) -> None:
        # Inputs in [-1, 1) and weights in [0.5, 1): outputs stay below 2, where one bfloat16 step
        # (2**-7) is within the runner's atol of 1e-2, so kernel and reference may round apart.
        self.x = torch.rand(rows, hidden, device=self.device, dtype=dtype) * 2 - 1
        self.weight = torch.rand(hidden, device=self.device, dtype=dtype) * 0.5 + 0.5

    def setup_llama_bf16(self):
        self._make(8192, 4096, torch.bfloat16)  # a batch of 8192 tokens, hidden 4096

    def benchmark_llama_bf16(self):
        self.out = self.kernel.rms_norm(self.x, self.weight, EPS)

    def verify_llama_bf16(self) -> torch.Tensor:
        return F.rms_norm(self.x, (self.x.shape[-1],), self.weight, EPS)

    def setup_decode_bf16(self):
        self._make(64, 8192, torch.bfloat16)  # decoding: few tokens, wide hidden

    def benchmark_decode_bf16(self):
        self.out = self.kernel.rms_norm(self.x, self.weight, EPS)

    def verify_decode_bf16(self) -> torch.Tensor:
        return F.rms_norm(self.x, (self.x.shape[-1],), self.weight, EPS)

    def setup_float32(self):
        self._make(4096, 2048, torch.float32)

    def benchmark_float32(self):
        self.out = self.kernel.rms_norm(self.x, self.weight, EPS)

    def verify_float32(self) -> torch.Tensor:
        return F.rms_norm(self.x, (self.x.shape[-1],), self.weight, EPS)


class FusedAddRMSNormWorkloads(Benchmark):
    """The residual add and the norm in one pass, against adding first, then F.rms_norm."""

    seed = 0

    def setup_llama_bf16(self):
        # x + residual stays in [-1, 1), so the outputs stay below 2 as above (the kernel rounds the sum
        # to bf16 before the norm, as `x + residual` does)
        self.x = torch.rand(8192, 4096, device=self.device, dtype=torch.bfloat16) - 0.5
        self.residual = torch.rand(8192, 4096, device=self.device, dtype=torch.bfloat16) - 0.5
        self.weight = torch.rand(4096, device=self.device, dtype=torch.bfloat16) * 0.1 + 0.7

    def benchmark_llama_bf16(self):
        self.out = self.kernel.fused_add_rms_norm(self.x, self.residual, self.weight, EPS)[0]

    def verify_llama_bf16(self) -> torch.Tensor:
        return F.rms_norm(self.x + self.residual, (self.x.shape[-1],), self.weight, EPS)
