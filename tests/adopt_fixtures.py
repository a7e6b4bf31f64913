"""Small torch.utils.cpp_extension projects for the adopt tests, written here in
the shapes real ones have (setup.py with CppExtension/CUDAExtension and a
pybind11 binding, load() scripts, the agent-written build.toml layout)."""

from __future__ import annotations

from pathlib import Path


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# A CppExtension with a package, read statically: glob, os.path, variables, define_macros.
SETUP_PY = """\
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")))
cxx = ["-O3", "-std=c++17"] + ["-DMINI_" + flag for flag in ("FAST",)]

setup(
    name="mini-ops",
    packages=["mini_ops"],
    ext_modules=[
        CppExtension("mini_ops._C", sources, extra_compile_args={"cxx": cxx}, define_macros=[("MINI_SCALE", "1")]),
    ],
    cmdclass={"build_ext": BuildExtension},
)
"""

OPS_H = """\
#pragma once
#include <torch/extension.h>

#include <string>
#include <tuple>
#include <vector>

torch::Tensor scale(const torch::Tensor& x, float factor);
void add_into(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b);
std::tuple<torch::Tensor, torch::Tensor> split_sign(torch::Tensor x);
torch::Tensor maybe_bias(const torch::Tensor& x, const c10::optional<torch::Tensor>& bias, bool twice);
torch::Tensor sum_dims(const torch::Tensor& x, std::vector<int64_t> dims);
int count(const torch::Tensor& x, int times);
torch::Tensor by_mode(const torch::Tensor& x, const std::string& mode);
"""

OPS_CPP = """\
#include <torch/extension.h>
#include "ops.h"

// a comment with a brace { and a string "PYBIND11_MODULE(x, m) {"
torch::Tensor scale(const torch::Tensor& x, float factor) { return x * factor; }

void add_into(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) { out.copy_(a + b); }

std::tuple<torch::Tensor, torch::Tensor> split_sign(torch::Tensor x) { return {x.clamp_min(0), x.clamp_max(0)}; }

torch::Tensor maybe_bias(const torch::Tensor& x, const c10::optional<torch::Tensor>& bias, bool twice) {
  auto y = bias.has_value() ? x + *bias : x.clone();
  return twice ? y * 2 : y;
}

torch::Tensor sum_dims(const torch::Tensor& x, std::vector<int64_t> dims) { return x.sum(dims); }

int count(const torch::Tensor& x, int times) { return static_cast<int>(x.numel()) * times; }

torch::Tensor by_mode(const torch::Tensor& x, const std::string& mode) { return mode == "double" ? x * 2 : x; }
"""

BINDING_CPP = """\
#include <torch/extension.h>
#include "ops.h"

namespace py = pybind11;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mini ops";
  m.def("scale", &scale, "x times factor", py::arg("x"), py::arg("factor") = 2.0);
  m.def("add_into", &add_into, "out = a + b");
  m.def("split_sign", &split_sign);
  m.def("maybe_bias", &maybe_bias, py::arg("x"), py::arg("bias") = py::none(), py::arg("twice") = false);
  m.def("sum_dims", &sum_dims);
  m.def("count", &count);
#ifdef MINI_FAST
  m.def("by_mode", &by_mode, py::arg("x"), py::kw_only(), py::arg("mode") = "double");
#endif
}
"""

PACKAGE_INIT = """\
from . import _C
from ._C import scale
from mini_ops.helpers import twice


def scale_ref(x, factor=2.0):
    return x * factor
"""

HELPERS = """\
import mini_ops._C as ext


def twice(x):
    return ext.scale(x, 2.0)
"""


def write_setup_project(root: Path) -> Path:
    return write(root, {"setup.py": SETUP_PY, "csrc/ops.h": OPS_H, "csrc/ops.cpp": OPS_CPP,
                        "csrc/binding.cpp": BINDING_CPP, "mini_ops/__init__.py": PACKAGE_INIT,
                        "mini_ops/helpers.py": HELPERS, "LICENSE": "MIT License\n\nPermission is hereby granted, "
                        "free of charge, to any person obtaining a copy\n"})


# The agent-written shape (burtenshaw/kernel-skill's examples): a build.toml without edition, version or
# license, a name with an underscore, and a pybind11 binding defining the functions it binds.
LAYOUT_TOML = """\
# Agent kernels
[general]
name = "agent_kernels"
backends = ["cuda"]

[torch]
src = [
    "torch-ext/torch_binding.cpp",
]

[kernel.relu]
backend = "cuda"
depends = []
src = ["kernel_src/relu.cu"]
cuda-capabilities = ["9.0"]
"""

LAYOUT_BINDING = """\
#include <torch/extension.h>
#include <cuda_runtime.h>

extern "C" void relu_forward_fp32(float*, const float*, int, cudaStream_t);

void relu_forward(torch::Tensor& output, const torch::Tensor& input, float alpha) {
    TORCH_CHECK(input.is_cuda(), "input must be a CUDA tensor");
    relu_forward_fp32(output.data_ptr<float>(), input.data_ptr<float>(), input.numel(), nullptr);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("relu_forward", &relu_forward, "ReLU forward (CUDA)");
}
"""

LAYOUT_KERNEL = """\
#include <cuda_runtime.h>

__global__ void relu_kernel(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] > 0.f ? in[i] : 0.f;
}

extern "C" void relu_forward_fp32(float* out, const float* in, int n, cudaStream_t stream) {
    relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(out, in, n);
}
"""

LAYOUT_INIT = """\
import torch

try:
    from . import _ops as ops
except ImportError:
    ops = None


def relu(x):
    out = torch.empty_like(x)
    ops.relu_forward(out, x, 0.0)
    return out
"""


def write_layout_project(root: Path) -> Path:
    return write(root, {"build.toml": LAYOUT_TOML, "torch-ext/torch_binding.cpp": LAYOUT_BINDING,
                        "kernel_src/relu.cu": LAYOUT_KERNEL, "torch-ext/agent_kernels/__init__.py": LAYOUT_INIT,
                        "pyproject.toml": '[project]\nname = "agent-kernels"\nlicense = {text = "MIT"}\n'})


# A project built with torch.utils.cpp_extension.load(): a wrapper module and a benchmark script.
LOAD_MAIN = """\
#include <torch/extension.h>

torch::Tensor forward(torch::Tensor q, torch::Tensor k);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", torch::wrap_pybind_function(forward), "forward");
}
"""

LOAD_KERNEL = """\
#include <torch/types.h>
#include <cuda_runtime.h>

torch::Tensor forward(torch::Tensor q, torch::Tensor k) { return q + k; }
"""

LOAD_WRAPPER = """\
import os

import torch
from torch.utils.cpp_extension import load

here = os.path.dirname(__file__)
mini_attn = load(name="mini_attn", sources=[os.path.join(here, "main.cpp"), os.path.join(here, "kern.cu")],
                 extra_cuda_cflags=["-O2", "-gencode", "arch=compute_80,code=[sm_80,compute_80]"])


class Attention(torch.nn.Module):
    def forward(self, q, k):
        return mini_attn.forward(q, k)
"""

LOAD_BENCH = """\
import torch
from torch.utils.cpp_extension import load

mini_attn = load(name="mini_attn", sources=["main.cpp", "kern.cu"], extra_cuda_cflags=["-O2"])
for _ in range(3):
    print(mini_attn.forward(torch.ones(2), torch.ones(2)))
"""


def write_load_project(root: Path) -> Path:
    return write(root, {"main.cpp": LOAD_MAIN, "kern.cu": LOAD_KERNEL, "attention.py": LOAD_WRAPPER,
                        "bench.py": LOAD_BENCH})


# A setup.py only running it can read: the extension depends on torch.cuda.is_available(), and it runs git.
DYNAMIC_SETUP = """\
import subprocess

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

try:
    version = subprocess.check_output(["git", "describe", "--tags"]).decode().strip()
except Exception:
    version = "0.0.0"

cuda = torch.cuda.is_available()
Extension = CUDAExtension if cuda else CppExtension
sources = ["dyn.cpp"] + (["dyn_kernel.cu"] if cuda else [])
setup(name="dyn", version=version, ext_modules=[Extension("dyn_ext", sources)],
      cmdclass={"build_ext": BuildExtension})
"""

DYNAMIC_CPP = """\
#include <torch/extension.h>

torch::Tensor twice(torch::Tensor x);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice); }
"""

DYNAMIC_CU = """\
#include <torch/extension.h>

torch::Tensor twice(torch::Tensor x) { return x * 2; }
"""


def write_dynamic_project(root: Path) -> Path:
    return write(root, {"setup.py": DYNAMIC_SETUP, "dyn.cpp": DYNAMIC_CPP, "dyn_kernel.cu": DYNAMIC_CU})


# What a port cannot carry: a lambda, a class, an overload, a py::object parameter, a module attribute.
HANDS_CPP = """\
#include <torch/extension.h>

torch::Tensor good(torch::Tensor x) { return x + 1; }
torch::Tensor overloaded(torch::Tensor x) { return x; }
torch::Tensor overloaded(torch::Tensor x, double y) { return x * y; }
torch::Tensor takes_object(torch::Tensor x, pybind11::object o) { return x; }

struct Counter { int n = 0; };

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("good", &good);
  m.def("lambda_op", [](torch::Tensor x) { return x * 3; });
  m.def("overloaded", &overloaded);
  m.def("takes_object", &takes_object);
  pybind11::class_<Counter>(m, "Counter").def(pybind11::init<>());
  m.attr("VERSION") = 3;
}
"""

HANDS_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="hands", ext_modules=[CppExtension("hands_ext", ["hands.cpp"])], cmdclass={"build_ext": BuildExtension})
"""


def write_hands_project(root: Path) -> Path:
    return write(root, {"setup.py": HANDS_SETUP, "hands.cpp": HANDS_CPP})


# A CPU extension of ops shaped like real index-tensor ones (pytorch_cluster, pointnet2, torch_scatter): an
# int64 index, int32 offsets with an output buffer whose shape follows the other arguments, complex input.
# The package's wrappers show how each op is called (`index.long()`, `offsets.int()`, `torch.zeros(...)`,
# `torch.view_as_complex`); `pick` is called nowhere, and checks its index in a helper adopt does not follow.
INDEX_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="index-ops", packages=["index_ops"], ext_modules=[CppExtension("index_ops._C", ["csrc/index.cpp"])],
      cmdclass={"build_ext": BuildExtension})
"""

INDEX_CPP = """\
#include <torch/extension.h>

torch::Tensor gather_rows(const torch::Tensor& src, const torch::Tensor& index) {
  TORCH_CHECK(index.scalar_type() == torch::kLong, "index must be an int64 tensor");
  TORCH_CHECK(src.dim() == 2 && index.dim() == 1, "src is 2-d, index 1-d");
  return src.index_select(0, index);
}

void segment_sum(torch::Tensor& out, const torch::Tensor& src, const torch::Tensor& offsets) {
  TORCH_CHECK(offsets.scalar_type() == torch::kInt, "offsets must be an int tensor");
  TORCH_CHECK(out.dim() == 2 && out.size(0) == offsets.size(0) - 1 && out.size(1) == src.size(1),
              "out must be (segments, features)");
  auto o = offsets.accessor<int, 1>();
  for (int64_t s = 0; s + 1 < offsets.size(0); ++s) {
    TORCH_CHECK(0 <= o[s] && o[s] <= o[s + 1] && o[s + 1] <= src.size(0), "offsets must be sorted row bounds");
    out[s] = src.slice(0, o[s], o[s + 1]).sum(0);
  }
}

torch::Tensor magnitude(const torch::Tensor& z) {
  TORCH_CHECK(z.is_complex(), "z must be complex");
  return z.abs();
}

static void check_where(const torch::Tensor& where) {
  TORCH_CHECK(where.scalar_type() == torch::kInt, "where must be an int32 tensor");
}

torch::Tensor pick(const torch::Tensor& src, const torch::Tensor& where) {
  check_where(where);
  return src.index_select(0, where.to(torch::kLong));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gather_rows", &gather_rows, "rows of src at index");
  m.def("segment_sum", &segment_sum, "out[s] = sum of src rows offsets[s]..offsets[s+1]");
  m.def("magnitude", &magnitude, "|z|");
  m.def("pick", &pick, "rows of src at where (int32)");
}
"""

INDEX_INIT = """\
import torch

from . import _C


def gather_rows(src, index):
    return _C.gather_rows(src, index.long())


def segment_sum(src, offsets):
    out = torch.zeros(offsets.numel() - 1, src.size(1), dtype=src.dtype, device=src.device)
    _C.segment_sum(out, src, offsets.int())
    return out


def magnitude(pairs):
    return _C.magnitude(torch.view_as_complex(pairs))
"""


def write_index_project(root: Path) -> Path:
    return write(root, {"setup.py": INDEX_SETUP, "csrc/index.cpp": INDEX_CPP, "index_ops/__init__.py": INDEX_INIT,
                        "LICENSE": "MIT License\n"})


# The index project's own tests as many extension projects keep them: beside setup.py, a pytest function
# and a unittest class, comparing with a reference in a module of their own; a `test.py` demo script that
# defines no test; and a test/ folder with a data file.
INDEX_ROOT_TESTS = {
    "test_index_ops.py": """\
import unittest

import torch

import index_ops
from reference import gather_rows_ref


def test_gather_rows_matches_the_reference():
    src, index = torch.randn(10, 3), torch.tensor([0, 2, 4])
    torch.testing.assert_close(index_ops.gather_rows(src, index), gather_rows_ref(src, index))


class SegmentSum(unittest.TestCase):
    def test_sums_the_rows_of_each_segment(self):
        src, offsets = torch.arange(12.0).view(6, 2), torch.tensor([0, 2, 6])
        expected = torch.stack([src[:2].sum(0), src[2:].sum(0)])
        torch.testing.assert_close(index_ops.segment_sum(src, offsets), expected)
""",
    "reference.py": "def gather_rows_ref(src, index):\n    return src[index]\n",
    "test.py": "import torch\nimport index_ops\n\nprint(index_ops.magnitude(torch.randn(4, 2)))\n",
    # PyTorch's extension tutorial form: torch's own TestCase (it imports expecttest and numpy, which PyPI's
    # torch does not install)
    "test/test_magnitude.py": """\
import json
from pathlib import Path

import torch
from torch.testing._internal.common_utils import TestCase

import index_ops


class TestMagnitude(TestCase):
    def test_magnitude_of_known_pairs(self):
        pairs = json.loads((Path(__file__).parent / "pairs.json").read_text())
        got = index_ops.magnitude(torch.tensor(pairs, dtype=torch.float32))
        self.assertEqual(got, torch.tensor([5.0, 13.0]))
""",
    "test/pairs.json": "[[3.0, 4.0], [5.0, 12.0]]\n",
}


def write_index_project_with_tests(root: Path) -> Path:
    return write(write_index_project(root), INDEX_ROOT_TESTS)


# PyTorch's extension tutorial form (pytorch/extension-cpp): TORCH_LIBRARY with the schemas, TORCH_LIBRARY_IMPL
# for CPU and for Autograd, a dummy module to import, torch.ops.<ns> and torch.library names in the Python.
LIBRARY_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="libmath", packages=["libmath"],
      ext_modules=[CppExtension("libmath._C", ["libmath/csrc/ops.cpp"], extra_compile_args={"cxx": ["-O2"]})],
      cmdclass={"build_ext": BuildExtension})
"""

LIBRARY_CPP = """\
#include <Python.h>
#include <torch/all.h>
#include <torch/library.h>

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
  return PyModule_Create(&module_def);
}
}

namespace libmath {

at::Tensor muladd_cpu(const at::Tensor& a, const at::Tensor& b, double c) { return a * b + c; }

void add_out_cpu(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) { out.copy_(a + b); }

at::Tensor gather_rows_cpu(const at::Tensor& x, const at::Tensor& index) {
  TORCH_CHECK(index.scalar_type() == at::kLong, "index must be int64");
  return x.index_select(0, index);
}

TORCH_LIBRARY(libmath, m) {
  m.def("muladd(Tensor a, Tensor b, float c) -> Tensor");
  m.def("libmath::add_out(Tensor a, Tensor b, Tensor(a!) out) -> ()");
  m.def("gather_rows(Tensor x, Tensor index) -> Tensor");
}

TORCH_LIBRARY_IMPL(libmath, CPU, m) {
  m.impl("muladd", &muladd_cpu);
  m.impl("libmath::add_out", &add_out_cpu);
  m.impl("gather_rows", &gather_rows_cpu);
}

}  // namespace libmath
"""

LIBRARY_INIT = """\
import torch
from . import _C, ops
"""

LIBRARY_OPS = """\
import torch
from torch import Tensor


def muladd(a: Tensor, b: Tensor, c: float) -> Tensor:
    return torch.ops.libmath.muladd.default(a, b, c)


@torch.library.register_fake("libmath::muladd")
def _(a, b, c):
    return torch.empty_like(a)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad * b, grad * a, None


def _setup_context(ctx, inputs, output):
    a, b, _ = inputs
    ctx.save_for_backward(a, b)


torch.library.register_autograd("libmath::muladd", _backward, setup_context=_setup_context)


def add_out(a: Tensor, b: Tensor, out: Tensor) -> None:
    torch.ops.libmath.add_out(a, b, out)


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    return torch.ops.libmath.gather_rows(x, index.long())


def muladd_ref(a, b, c):
    return a * b + c
"""


def write_library_project(root: Path) -> Path:
    return write(root, {"setup.py": LIBRARY_SETUP, "libmath/__init__.py": LIBRARY_INIT, "libmath/ops.py": LIBRARY_OPS,
                        "libmath/csrc/ops.cpp": LIBRARY_CPP, "LICENSE": "MIT License\n\nPermission is hereby granted, "
                        "free of charge, to any person obtaining a copy\n"})


# The static registration of large extension libraries (torch_scatter, torch_cluster): one CppExtension per
# source, each a RegisterOperators chain without schemas (torch infers them), loaded with torch.ops.load_library
# from a loop that looks the libraries up by name; and a lookup by name through importlib.
OPERATORS_SETUP = """\
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

exts = [CppExtension(f"segs._{os.path.basename(p)[:-4]}_cpu", [p], define_macros=[("WITH_PYTHON", None)])
        for p in sorted(glob.glob("csrc/*.cpp"))]
setup(name="segs", packages=["segs"], ext_modules=exts, cmdclass={"build_ext": BuildExtension})
"""

OPERATORS_SUM = """\
#ifdef WITH_PYTHON
#include <Python.h>
#endif
#include <torch/script.h>

#include <optional>

#define SEGS_API

SEGS_API torch::Tensor segment_sum(torch::Tensor src, torch::Tensor indptr, std::optional<int64_t> size) {
  TORCH_CHECK(indptr.scalar_type() == torch::kLong, "indptr must be int64");
  auto n = size.has_value() ? *size : indptr.numel() - 1;
  auto out = torch::zeros({n}, src.options());
  auto ptr = indptr.accessor<int64_t, 1>();
  for (int64_t i = 0; i < indptr.numel() - 1; i++) out[i] = src.slice(0, ptr[i], ptr[i + 1]).sum();
  return out;
}

static auto registry = torch::RegisterOperators()
                           .op("segs::segment_sum", &segment_sum)
                           .op("segs::segment_count(Tensor indptr) -> Tensor", [](torch::Tensor indptr) {
                             return indptr.slice(0, 1) - indptr.slice(0, 0, -1);
                           });
"""

OPERATORS_VERSION = """\
#include <torch/script.h>

int64_t segs_version() { return 7; }

static auto registry = torch::RegisterOperators().op("segs::version", [] { return segs_version(); });
"""

OPERATORS_INIT = """\
import importlib
import os.path as osp

import torch

for library in ["_sum", "_version"]:
    spec = importlib.machinery.PathFinder().find_spec(f"{library}_cpu", [osp.dirname(__file__)])
    if spec is not None:
        torch.ops.load_library(spec.origin)
    else:
        raise ImportError(f"Could not find module '{library}_cpu' in {osp.dirname(__file__)}")

version = torch.ops.segs.version()

from .sums import segment_sum  # noqa
"""

OPERATORS_SUMS = """\
from typing import Optional

import torch


def segment_sum(src: torch.Tensor, indptr: torch.Tensor, size: Optional[int] = None) -> torch.Tensor:
    return torch.ops.segs.segment_sum(src, indptr, size)
"""


def write_operators_project(root: Path) -> Path:
    return write(root, {"setup.py": OPERATORS_SETUP, "csrc/sum.cpp": OPERATORS_SUM, "csrc/version.cpp": OPERATORS_VERSION,
                        "segs/__init__.py": OPERATORS_INIT, "segs/sums.py": OPERATORS_SUMS,
                        "LICENSE": "MIT License\n\nPermission is hereby granted, free of charge, to any person "
                        "obtaining a copy\n"})


# One extension, two registration styles: a pybind11 module and a TORCH_LIBRARY of its own namespace.
MIXED_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="mixed", packages=["mixed"],
      ext_modules=[CppExtension("mixed._C", ["csrc/bind.cpp", "csrc/lib.cpp"])], cmdclass={"build_ext": BuildExtension})
"""

MIXED_BIND = """\
#include <torch/extension.h>

torch::Tensor scale(const torch::Tensor& x, double factor) { return x * factor; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale, "x times factor"); }
"""

MIXED_LIB = """\
#include <torch/library.h>
#include <ATen/ATen.h>

at::Tensor shift(const at::Tensor& x, double s) { return x + s; }

TORCH_LIBRARY(mixed, m) { m.def("shift(Tensor x, float s) -> Tensor", &shift); }
"""

MIXED_INIT = """\
import torch
from . import _C


def scale(x, factor):
    return _C.scale(x, factor)


def shift(x, s):
    return torch.ops.mixed.shift(x, s)
"""


def write_mixed_project(root: Path) -> Path:
    return write(root, {"setup.py": MIXED_SETUP, "csrc/bind.cpp": MIXED_BIND, "csrc/lib.cpp": MIXED_LIB,
                        "mixed/__init__.py": MIXED_INIT, "LICENSE": "MIT License\n\nPermission is hereby granted, "
                        "free of charge, to any person obtaining a copy\n"})


# A wrapper that finds its extension by name, building it with load() where it is not installed.
LOOKUP_WRAPPER = """\
import importlib
import os

import torch
from torch.utils.cpp_extension import load

_here = os.path.dirname(os.path.abspath(__file__))

if importlib.util.find_spec("fastrelu_ext") is not None:
    fastrelu_ext = importlib.import_module("fastrelu_ext")
else:
    fastrelu_ext = load(name="fastrelu_ext", sources=[os.path.join(_here, "relu.cpp")])

try:
    import fastrelu_ext as _again
except ImportError:
    _again = load(name="fastrelu_ext", sources=[os.path.join(_here, "relu.cpp")])

HAVE_EXT = importlib.find_loader("fastrelu_ext") is not None


def relu(x):
    return fastrelu_ext.relu(x)
"""

LOOKUP_CPP = """\
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
"""


def write_lookup_project(root: Path) -> Path:
    return write(root, {"fastrelu.py": LOOKUP_WRAPPER, "relu.cpp": LOOKUP_CPP})


# A THC-era CUDA extension (the RoIPool/RoIAlign extensions of 2018-2020 detection code): THC headers, the THC
# state and stream, THCudaCheck, THCCeilDiv, AT_CHECK, x.type() given to AT_DISPATCH, tensor.data<T>().
THC_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(name="roipool", ext_modules=[CUDAExtension("roipool_ext", ["src/roi_pool.cpp", "src/roi_pool_kernel.cu"])],
      cmdclass={"build_ext": BuildExtension})
"""

THC_CPP = """\
#include <torch/extension.h>
#include <THC/THC.h>

extern THCState *state;

at::Tensor roi_pool_forward_cuda(const at::Tensor& input, const at::Tensor& rois, int64_t pooled);

#define CHECK_CUDA(x) AT_CHECK(x.type().is_cuda(), #x " must be a CUDA tensor")

at::Tensor roi_pool_forward(const at::Tensor& input, const at::Tensor& rois, int64_t pooled) {
  CHECK_CUDA(input);
  CHECK_CUDA(rois);
  return roi_pool_forward_cuda(input, rois, pooled);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("roi_pool_forward", &roi_pool_forward, "RoI max pooling"); }
"""

THC_CU = """\
#include <ATen/ATen.h>
#include <THC/THC.h>
#include <THC/THCAtomics.cuh>
#include <THC/THCDeviceUtils.cuh>

#include <algorithm>

extern THCState *state;

// rois: [n, 5] (batch index, x1, y1, x2, y2); output: [n, channels, pooled, pooled], the max of each bin
template <typename scalar_t>
__global__ void RoIPoolForward(const int64_t nthreads, const scalar_t* bottom, const scalar_t* rois,
                               int64_t channels, int64_t height, int64_t width, int64_t pooled, scalar_t* top) {
  for (int64_t index = blockIdx.x * blockDim.x + threadIdx.x; index < nthreads; index += blockDim.x * gridDim.x) {
    int64_t pw = index % pooled, ph = (index / pooled) % pooled, c = (index / pooled / pooled) % channels;
    int64_t n = index / pooled / pooled / channels;
    const scalar_t* roi = rois + n * 5;
    int64_t b = static_cast<int64_t>(roi[0]);
    int64_t x1 = round(roi[1]), y1 = round(roi[2]), x2 = round(roi[3]), y2 = round(roi[4]);
    int64_t w = max(x2 - x1 + 1, (int64_t)1), h = max(y2 - y1 + 1, (int64_t)1);
    int64_t hs = min(max(y1 + ph * h / pooled, (int64_t)0), height), he = min(max(y1 + ((ph + 1) * h + pooled - 1) / pooled, (int64_t)0), height);
    int64_t ws = min(max(x1 + pw * w / pooled, (int64_t)0), width), we = min(max(x1 + ((pw + 1) * w + pooled - 1) / pooled, (int64_t)0), width);
    scalar_t best = (he <= hs || we <= ws) ? scalar_t(0) : scalar_t(-1e30);
    const scalar_t* plane = bottom + (b * channels + c) * height * width;
    for (int64_t y = hs; y < he; ++y)
      for (int64_t x = ws; x < we; ++x) best = max(best, plane[y * width + x]);
    top[index] = best;
  }
}

at::Tensor roi_pool_forward_cuda(const at::Tensor& input, const at::Tensor& rois, int64_t pooled) {
  auto output = at::zeros({rois.size(0), input.size(1), pooled, pooled}, input.options());
  int64_t count = output.numel();
  cudaStream_t stream = THCState_getCurrentStream(state);
  dim3 grid(std::min(THCCeilDiv(count, (int64_t)512), (int64_t)4096));
  AT_DISPATCH_FLOATING_TYPES(input.type(), "roi_pool_forward", [&] {
    RoIPoolForward<scalar_t><<<grid, 512, 0, stream>>>(count, input.contiguous().data<scalar_t>(),
        rois.contiguous().data<scalar_t>(), input.size(1), input.size(2), input.size(3), pooled,
        output.data<scalar_t>());
  });
  THCudaCheck(cudaGetLastError());
  return output;
}
"""


def write_thc_project(root: Path) -> Path:
    return write(root, {"setup.py": THC_SETUP, "src/roi_pool.cpp": THC_CPP, "src/roi_pool_kernel.cu": THC_CU,
                        "LICENSE": "MIT License\n\nPermission is hereby granted, free of charge, to any person "
                        "obtaining a copy\n"})


# A CPU extension beside a CUDA one (longcw/RoIAlign.pytorch's shape): the CPU one always, the CUDA one where
# CUDA is; the same function names in both; the package picks one by the tensor's device.
PAIR_SETUP = """\
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

modules = [CppExtension("pair.scale_cpu", ["pair/src/scale.cpp"])]
if torch.cuda.is_available():
    modules.append(CUDAExtension("pair.scale_gpu", ["pair/src/scale_gpu.cpp", "pair/src/scale_kernel.cu"]))
setup(name="pair", packages=["pair"], ext_modules=modules, cmdclass={"build_ext": BuildExtension})
"""

PAIR_CPP = """\
#include <torch/extension.h>

void scale_forward(torch::Tensor x, double factor, torch::Tensor out) { out.copy_(x * factor); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &scale_forward, "out = x * factor"); }
"""

PAIR_GPU_CPP = """\
#include <torch/extension.h>

void scale_forward_cuda(torch::Tensor x, double factor, torch::Tensor out);

void scale_forward(torch::Tensor x, double factor, torch::Tensor out) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  scale_forward_cuda(x, factor, out);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &scale_forward, "out = x * factor"); }
"""

PAIR_CU = """\
#include <torch/extension.h>

__global__ void scale_kernel(const float* x, float factor, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * factor;
}

void scale_forward_cuda(torch::Tensor x, double factor, torch::Tensor out) {
  int64_t n = x.numel();
  scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), (float)factor, out.data_ptr<float>(), n);
}
"""

PAIR_INIT = """\
import torch

from . import scale_cpu

try:
    from . import scale_gpu
except ImportError:
    scale_gpu = None


def scale(x, factor):
    out = torch.empty_like(x)
    (scale_gpu if x.is_cuda else scale_cpu).forward(x, factor, out)
    return out
"""


def write_pair_project(root: Path) -> Path:
    return write(root, {"setup.py": PAIR_SETUP, "pair/__init__.py": PAIR_INIT, "pair/src/scale.cpp": PAIR_CPP,
                        "pair/src/scale_gpu.cpp": PAIR_GPU_CPP, "pair/src/scale_kernel.cu": PAIR_CU,
                        "LICENSE": "MIT License\n"})


# The same pair as longcw/RoIAlign.pytorch writes it: the CPU source defines its functions inside
# `namespace torch { ... }` and names `torch::Tensor` there; besides the twins, the CPU extension binds a function
# of its own, and the CUDA one a function that picks its CPU or CUDA code on the tensor's device
# (maskrcnn-benchmark's nms: `if (dets.is_cuda()) ... return nms_cpu(...)`).
NAMESPACED_PAIR_CPP = """\
#include <torch/extension.h>

namespace torch {
void scale_forward(torch::Tensor x, double factor, torch::Tensor out) { out.copy_(x * factor); }

torch::Tensor scaled_sum(torch::Tensor x, double factor) { return (x * factor).sum(); }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &torch::scale_forward, "out = x * factor");
  m.def("scaled_sum", &torch::scaled_sum, "sum of x * factor");
}
"""

NAMESPACED_PAIR_GPU_CPP = """\
#include <torch/extension.h>

void scale_forward_cuda(torch::Tensor x, double factor, torch::Tensor out);

void scale_forward(torch::Tensor x, double factor, torch::Tensor out) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  scale_forward_cuda(x, factor, out);
}

torch::Tensor positive_part(torch::Tensor x) {
  if (x.is_cuda()) {
    auto out = torch::empty_like(x);
    scale_forward_cuda(x.clamp_min(0), 1.0, out);
    return out;
  }
  return x.clamp_min(0);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &scale_forward, "out = x * factor");
  m.def("positive_part", &positive_part, "x where positive, else 0");
}
"""


def write_namespaced_pair_project(root: Path) -> Path:
    return write(root, {"setup.py": PAIR_SETUP, "pair/__init__.py": PAIR_INIT, "pair/src/scale.cpp": NAMESPACED_PAIR_CPP,
                        "pair/src/scale_gpu.cpp": NAMESPACED_PAIR_GPU_CPP, "pair/src/scale_kernel.cu": PAIR_CU,
                        "LICENSE": "MIT License\n"})


# CPU code built as a CUDAExtension (qinzheng93/GeoTransformer's shape): the op checks its tensors are on the CPU
# (CHECK_CPU), whichever variant it is built into; a second op dispatches on the device instead.
CPU_IN_CUDA_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(name="neighbors", packages=["neighbors"],
      ext_modules=[CUDAExtension("neighbors.ext", ["neighbors/csrc/radius.cpp"])], cmdclass={"build_ext": BuildExtension})
"""

CPU_IN_CUDA_CPP = """\
#include <torch/extension.h>

#define CHECK_CPU(x) TORCH_CHECK(!x.device().is_cuda(), #x " must be a CPU tensor")

at::Tensor count_within(const at::Tensor& points, const at::Tensor& lengths, double radius) {
  CHECK_CPU(points);
  CHECK_CPU(lengths);
  TORCH_CHECK(lengths.scalar_type() == at::kLong, "lengths must be int64");
  return (points.norm(2, 1) < radius).sum().unsqueeze(0);
}

// stack mode: the rows of q_points and s_points split into batch elements by q_lengths and s_lengths
at::Tensor pairs_within(const at::Tensor& q_points, const at::Tensor& s_points, const at::Tensor& q_lengths,
                        const at::Tensor& s_lengths, double radius) {
  CHECK_CPU(q_points);
  TORCH_CHECK(s_points.dim() == 2 && s_points.size(0) == 5, "five support points");
  TORCH_CHECK(s_points.size(1) == q_points.size(1), "points of one dimension");
  TORCH_CHECK(q_lengths.scalar_type() == at::kLong && s_lengths.scalar_type() == at::kLong, "int64 lengths");
  TORCH_CHECK(q_lengths.sum().item<int64_t>() == q_points.size(0), "q_lengths must add up to the rows of q_points");
  TORCH_CHECK(s_lengths.sum().item<int64_t>() == s_points.size(0), "s_lengths must add up to the rows of s_points");
  return at::cdist(q_points, s_points).lt(radius).sum().unsqueeze(0);
}

at::Tensor doubled(const at::Tensor& x) {
  if (!x.is_cuda()) {
    return x * 2;
  }
  return x + x;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("count_within", &count_within, "points closer than radius to the origin");
  m.def("pairs_within", &pairs_within, "pairs of a query and a support point closer than radius");
  m.def("doubled", &doubled, "x * 2");
}
"""


def write_cpu_in_cuda_project(root: Path, cuda: bool = True) -> Path:
    """cuda=False: the same as a CppExtension (a cpu variant this machine builds)."""
    setup = CPU_IN_CUDA_SETUP if cuda else CPU_IN_CUDA_SETUP.replace("CUDAExtension", "CppExtension")
    return write(root, {"setup.py": setup, "neighbors/__init__.py": "from . import ext\n",
                        "neighbors/csrc/radius.cpp": CPU_IN_CUDA_CPP, "LICENSE": "MIT License\n"})


# One PYBIND11_MODULE per build flavour (`#ifdef USE_CUDA ... #else ... #endif`): only one is ever compiled
FLAVOURS_OPS_CPP = """\
#include <torch/extension.h>

torch::Tensor scale_cpu(torch::Tensor x, double factor) { return x * factor; }

#ifdef USE_CUDA
torch::Tensor scale_cuda(torch::Tensor x, double factor);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale", &scale_cuda, "scale (CUDA)");
}
#else
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale", &scale_cpu, "scale (CPU)");
}
#endif
"""


def write_flavours_project(root: Path) -> Path:
    """A CUDAExtension with USE_CUDA where torch sees a GPU, else a CppExtension of the same .cpp: the module
    block of each flavour registers its own function."""
    return write(root, {
        "csrc/ops.cpp": FLAVOURS_OPS_CPP,
        "csrc/kernel.cu": "#include <torch/all.h>\n"
                          "torch::Tensor scale_cuda(torch::Tensor x, double factor) { return x * factor; }\n",
        "setup.py": "import torch\nfrom setuptools import setup\n"
                    "from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension\n\n"
                    "if torch.cuda.is_available():\n"
                    "    ext = CUDAExtension('flavours_ext', ['csrc/ops.cpp', 'csrc/kernel.cu'],\n"
                    "                        define_macros=[('USE_CUDA', None)])\n"
                    "else:\n"
                    "    ext = CppExtension('flavours_ext', ['csrc/ops.cpp'])\n"
                    "setup(name='flavours', ext_modules=[ext], cmdclass={'build_ext': BuildExtension})\n",
        "examples/demo.py": "import torch\nimport flavours_ext\n\nprint(flavours_ext.scale(torch.ones(4, 8), 2.0))\n",
    })


def write_sibling_packages_project(root: Path) -> Path:
    """Deformable-DETR's ops layout: setup.py installs `functions` and `modules` side by side (find_packages), a
    top-level extension module, and `modules` imports `functions` relatively (`from ..functions import X`)."""
    return write(root, {
        "src/vision.cpp": "#include <torch/extension.h>\n\n"
                          "torch::Tensor scale_forward(torch::Tensor x, double factor) { return x * factor; }\n\n"
                          "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
                          '  m.def("scale_forward", &scale_forward, "scale_forward");\n}\n',
        "setup.py": "from setuptools import find_packages, setup\n"
                    "from torch.utils.cpp_extension import BuildExtension, CppExtension\n\n"
                    "setup(name='MultiScaleScale', version='1.0',\n"
                    "      ext_modules=[CppExtension('ScaleOps', ['src/vision.cpp'])],\n"
                    "      packages=find_packages(exclude=('configs', 'tests')),\n"
                    "      cmdclass={'build_ext': BuildExtension})\n",
        "functions/__init__.py": "from .scale_func import ScaleFunction\n",
        "functions/scale_func.py": "from torch.autograd import Function\n\nimport ScaleOps as SO\n\n\n"
                                   "class ScaleFunction(Function):\n    @staticmethod\n"
                                   "    def forward(ctx, x, factor):\n        ctx.factor = factor\n"
                                   "        return SO.scale_forward(x, factor)\n\n    @staticmethod\n"
                                   "    def backward(ctx, grad):\n        return grad * ctx.factor, None\n",
        "modules/__init__.py": "from .scale import Scale\n",
        "modules/scale.py": "import torch.nn as nn\n\nfrom ..functions import ScaleFunction\n\n\n"
                            "class Scale(nn.Module):\n    def __init__(self, factor=2.0):\n"
                            "        super().__init__()\n        self.factor = factor\n\n"
                            "    def forward(self, x):\n        return ScaleFunction.apply(x, self.factor)\n",
    })


def write_load_named_like_a_module_project(root: Path) -> Path:
    """Two load() extensions in one package, one built by pkg/knn.py under the name `knn` (the module's own)."""
    load_module = ("import os\nfrom torch.utils.cpp_extension import load\n\n"
                   "here = os.path.dirname(os.path.abspath(__file__))\n"
                   "{var} = load(name=\"{name}\", sources=[os.path.join(here, \"csrc\", \"{name}.cpp\")])\n\n\n"
                   "def {fn}({params}):\n    return {var}.{fn}_forward({params})\n")
    return write(root, {
        "pkg/csrc/knn.cpp": "#include <torch/extension.h>\n"
                            "torch::Tensor knn_forward(torch::Tensor x, int64_t k) { return std::get<1>(x.topk(k, -1)); }\n"
                            'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("knn_forward", &knn_forward, "knn"); }\n',
        "pkg/csrc/dist_ext.cpp": "#include <torch/extension.h>\n"
                                 "torch::Tensor dist_forward(torch::Tensor a, torch::Tensor b) { return (a - b).abs(); }\n"
                                 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("dist_forward", &dist_forward, "d"); }\n',
        "pkg/__init__.py": "from .knn import knn\nfrom .dist import dist\n",
        "pkg/knn.py": load_module.format(var="_knn", name="knn", fn="knn", params="x, k"),
        "pkg/dist.py": load_module.format(var="_dist", name="dist_ext", fn="dist", params="a, b"),
        "examples/demo.py": "import torch\nfrom pkg import dist, knn\n\n"
                            "print(knn(torch.randn(4, 8), 2), dist(torch.ones(3), torch.zeros(3)))\n",
    })


# A CppExtension whose project calls its ops in a script beside setup.py and in its README: what
# `adopt --record` records from the original and the replay tests compare the kernel with.
RECORDED_SETUP_PY = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="rec-ops",
    packages=["rec_ops"],
    ext_modules=[CppExtension("rec_ops._C", ["csrc/rec.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
"""

RECORDED_CPP = """\
#include <torch/extension.h>

torch::Tensor scale(const torch::Tensor& x, double factor) { return x * factor; }

void add_into(torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& b) { out.copy_(a + b); }

torch::Tensor argmax_rows(const torch::Tensor& x) { return x.argmax(1); }

int64_t count_positive(const torch::Tensor& x) { return (x > 0).sum().item<int64_t>(); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale", &scale);
  m.def("add_into", &add_into);
  m.def("argmax_rows", &argmax_rows);
  m.def("count_positive", &count_positive);
}
"""

RECORDED_DEMO = """\
import torch

from rec_ops import _C

x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
print("scale", _C.scale(x, 3.0).sum().item())
out = torch.zeros(4, 8)
_C.add_into(out, x, x * 2)
print("argmax", _C.argmax_rows(x).tolist())
print("positive", _C.count_positive(x))
try:
    _C.argmax_rows(torch.zeros(3))  # the original refuses a 1-d tensor: not the kernel's to match
except (IndexError, RuntimeError) as refused:
    print("refused", refused)
"""

RECORDED_README = """\
# rec-ops

```python
import torch
from rec_ops import _C

print(_C.scale(torch.arange(6, dtype=torch.float64).reshape(2, 3), 0.5))
```
"""


def write_recorded_project(root: Path) -> Path:
    return write(root, {"setup.py": RECORDED_SETUP_PY, "csrc/rec.cpp": RECORDED_CPP, "rec_ops/__init__.py": "",
                        "demo.py": RECORDED_DEMO, "README.md": RECORDED_README,
                        "LICENSE": "MIT License\n\nPermission is hereby granted, free of charge\n"})
