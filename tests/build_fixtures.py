"""Tiny kernel projects for the build tests: small enough to compile in
seconds, real enough to load through the `kernels` client."""

from __future__ import annotations

import subprocess
from pathlib import Path

BUILD_TOML = """\
[general]
name = "tiny-scale"
version = 1
license = "apache-2.0"
backends = ["cpu", "cuda"]
edition = 5

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.scale_cpu]
backend = "cpu"
src = ["scale_cpu/scale.cpp", "scale_cpu/scale.h"]
depends = ["torch"]

[kernel.scale_cuda]
backend = "cuda"
src = ["scale_cuda/scale.cu", "scale_cuda/launch.cpp"]
depends = ["torch", "cutlass_3_6"]
cuda-capabilities = ["8.0", "9.0+PTX"]
"""

BINDING_H = """\
#pragma once
#include <ATen/core/Tensor.h>
void scale(at::Tensor &out, at::Tensor const &input, double factor);
"""

BINDING_CPP = """\
#include <torch/library.h>
#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("scale(Tensor! out, Tensor input, float factor) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("scale", c10::kCPU, &scale);
#elif defined(CUDA_KERNEL)
  ops.impl("scale", c10::kCUDA, &scale);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
"""

SCALE_H = """\
#pragma once
#include <cstdint>
void scale_floats(float *dst, const float *src, int64_t n, float factor);
"""

SCALE_CPP = """\
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <cmath>
#include "scale.h"

void scale_floats(float *dst, const float *src, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * factor;
}

void scale(at::Tensor &out, at::Tensor const &input, double factor) {
  TORCH_CHECK(input.scalar_type() == at::kFloat && input.is_contiguous(), "contiguous float32 only");
  scale_floats(out.data_ptr<float>(), input.data_ptr<float>(), input.numel(), static_cast<float>(factor));
}
"""

# The CUDA kernel needs no torch headers (fast to compile) but one CUTLASS
# header (a `depends` the build must provide); the launcher is C++ against ATen.
SCALE_CU = """\
#include <cstdint>
#include <cuda_runtime.h>
#include <cutlass/cutlass.h>

CUTLASS_HOST_DEVICE float times(float a, float b) { return a * b; }

template <typename Op>
__global__ void map_kernel(float *out, const float *in, int64_t n, Op op) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = op(in[i]);
}

void launch_scale(float *out, const float *in, float f, int64_t n, cudaStream_t stream) {
  // a __device__ lambda, as kernels-community/rotary has: upstream builds get --expt-extended-lambda
  // from torch's CMake (Caffe2 public/cuda.cmake)
  auto op = [f] __device__ (float x) { return times(x, f); };
  map_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(out, in, n, op);
}
"""

LAUNCH_CPP = """\
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

void launch_scale(float *out, const float *in, float f, int64_t n, cudaStream_t stream);

void scale(at::Tensor &out, at::Tensor const &input, double factor) {
  launch_scale(out.data_ptr<float>(), input.data_ptr<float>(), static_cast<float>(factor), input.numel(),
               c10::cuda::getCurrentCUDAStream().stream());
}
"""

INIT_PY = """\
import torch

from ._ops import ops


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    out = torch.empty_like(x)
    ops.scale(out, x, factor)
    return out
"""

NOARCH_TOML = """\
[general]
name = "tiny-noarch"
version = 2
license = "mit"
backends = ["cpu", "cuda"]
edition = 5

[torch-noarch]

[kernel]
"""

NOARCH_INIT = """\
import torch


def softsign(x: torch.Tensor) -> torch.Tensor:
    return x / (1 + x.abs())
"""


def write_tiny_project(root: Path, git: bool = False) -> Path:
    files = {
        "build.toml": BUILD_TOML,
        "torch-ext/torch_binding.h": BINDING_H,
        "torch-ext/torch_binding.cpp": BINDING_CPP,
        "torch-ext/tiny_scale/__init__.py": INIT_PY,
        "scale_cpu/scale.h": SCALE_H,
        "scale_cpu/scale.cpp": SCALE_CPP,
        "scale_cuda/scale.cu": SCALE_CU,
        "scale_cuda/launch.cpp": LAUNCH_CPP,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if git:
        (root / ".gitignore").write_text("build/\n")
        for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@example.com",
                                                       "commit", "-q", "-m", "init"]):
            subprocess.run(["git", "-C", str(root), *argv], check=True)
    return root


def write_noarch_project(root: Path) -> Path:
    (root / "torch-ext" / "tiny_noarch").mkdir(parents=True)
    (root / "build.toml").write_text(NOARCH_TOML)
    (root / "torch-ext" / "tiny_noarch" / "__init__.py").write_text(NOARCH_INIT)
    return root



def variant_script(variant: Path, body: str) -> str:
    """A script that loads built variant folder `variant` as kernels does (its metadata's id as the module
    name), binds its ops namespace to `ops`, then runs `body`."""
    return f"""
import importlib.util, json, sys, torch
meta = json.load(open({str(variant / "metadata.json")!r}))
spec = importlib.util.spec_from_file_location(meta["id"], {str(variant / "__init__.py")!r})
module = importlib.util.module_from_spec(spec)
sys.modules[meta["id"]] = module
spec.loader.exec_module(module)
ops = getattr(torch.ops, meta["id"])
{body}"""
