"""An adopted project of torchsort's shape compiles for CUDA as it did under
torch.utils.cpp_extension, against a PyPI CUDA torch (no GPU needed): a CUDA
kernel comparing c10::Half values (compiles only with the defines
cpp_extension gives nvcc), and a CPU extension defining functions of the same
names, compiled into the cuda variant too (its own namespace: one .so now)
where its kernel answers CPU tensors."""

from __future__ import annotations

import json
import subprocess

import pytest

from publisher.plan.matrix import load_matrix
from publisher.plan.planner import make_plan
from publisher.project.load import require_project
from publisher.toolchains.provision import ensure_toolchain

from adopt_fixtures import write, write_namespaced_pair_project
from build_fixtures import variant_script
from cli_helper import run_cli
from matrix_fixtures import CU130_MATRIX, GPU_RUNNER_MATRIX

pytestmark = pytest.mark.slow

VARIANT = "torch211-cxx11-cu130-x86_64-linux"

SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

setup(name="halfclamp", packages=["halfclamp"],
      ext_modules=[CppExtension("halfclamp._cpu", ["halfclamp/clamp.cpp"]),
                   CUDAExtension("halfclamp._C", ["halfclamp/clamp.cu"], extra_compile_args={"nvcc": ["-O3"]})],
      cmdclass={"build_ext": BuildExtension})
"""
KERNEL = """\
#include <torch/extension.h>
#include <ATen/Dispatch.h>

template <typename scalar_t>
__global__ void clamp_above(const scalar_t* x, scalar_t* y, const scalar_t* bound, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > bound[0] ? bound[0] : x[i];
}

torch::Tensor clamp_max(torch::Tensor x, torch::Tensor bound) {
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "clamp_max", ([&] {
    clamp_above<scalar_t><<<(n + 255) / 256, 256>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                                                     bound.data_ptr<scalar_t>(), n);
  }));
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("clamp_max", &clamp_max, "x clamped above at bound"); }
"""
CPU_KERNEL = """\
#include <torch/extension.h>

torch::Tensor clamp_max(torch::Tensor x, torch::Tensor bound) { return torch::minimum(x, bound); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("clamp_max", &clamp_max, "x clamped above at bound"); }
"""
INIT = """\
import torch
from . import _C, _cpu

def clamp_max(x, bound):
    return (_C if x.is_cuda else _cpu).clamp_max(x, bound)
"""


def test_an_adopted_kernel_comparing_halves_and_its_cpu_twin_compile_for_cuda(tmp_path):
    root = write(tmp_path / "halfclamp", {"setup.py": SETUP, "halfclamp/__init__.py": INIT,
                                         "halfclamp/clamp.cu": KERNEL, "halfclamp/clamp.cpp": CPU_KERNEL})
    done = run_cli("adopt", str(root), "--force", "--license", "mit")
    assert done.returncode == 0, done.output
    # One architecture: what needs cpp_extension's defines is the same for every one (the sibling test below
    # compiles for one too); compiling the toolchain's whole list took ~6 of CI's minutes.
    toml = root / "build.toml"
    toml.write_text(toml.read_text().replace('backend = "cuda"\n', 'backend = "cuda"\ncuda-capabilities = ["9.0"]\n'))
    assert toml.read_text().count("cuda-capabilities") == toml.read_text().count('backend = "cuda"') > 0
    built = run_cli("build", str(root), "--matrix", str(GPU_RUNNER_MATRIX), "--variant", VARIANT, "--json",
                    timeout=3000)
    entry = json.loads(built.stdout)["variants"][0]
    log = root / "build" / ".publisher" / "logs" / f"{VARIANT}.log"
    assert built.returncode == 0 and entry["state"] == "built", (entry, log.read_text()[-3000:])

    # the cuda variant answers CPU tensors with the CPU extension's kernel, as the original package did
    planned = make_plan(require_project(root), load_matrix(GPU_RUNNER_MATRIX)).by_name()[VARIANT]
    toolchain = ensure_toolchain(planned.toolchain)
    variant = root / "build" / VARIANT
    script = variant_script(variant, """
x = torch.tensor([3.0, -1.0, 0.5, 2.0])
print(json.dumps(ops.clamp_max(x, torch.tensor([1.0])).tolist()))
""")
    out = subprocess.run([toolchain.python, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [1.0, -1.0, 0.5, 1.0]


def test_a_pair_whose_cpu_source_reopens_namespace_torch_compiles_for_cuda_and_answers_cpu_tensors(tmp_path):
    """longcw/RoIAlign.pytorch: its cu130 variant did not compile on the GPU machine (the CPU source, enclosed,
    defines its functions in `namespace torch` and names torch::Tensor there); maskrcnn-benchmark's nms: a CUDA
    extension's function that picks its CPU code for CPU tensors was registered for CUDA only."""
    root = write_namespaced_pair_project(tmp_path / "pair")
    done = run_cli("adopt", str(root), "--force", "--license", "mit")
    assert done.returncode == 0, done.output
    toml = root / "build.toml"
    toml.write_text(toml.read_text().replace('backend = "cuda"\n', 'backend = "cuda"\ncuda-capabilities = ["9.0"]\n'))
    matrix = tmp_path / "cu130.yaml"
    matrix.write_text(CU130_MATRIX)
    built = run_cli("build", str(root), "--matrix", str(matrix), "--json", timeout=3000)
    (entry,) = json.loads(built.stdout)["variants"]
    log = root / "build" / ".publisher" / "logs" / f"{entry['variant']}.log"
    assert built.returncode == 0 and entry["state"] == "built", (entry, log.read_text()[-3000:])

    planned = make_plan(require_project(root), load_matrix(matrix)).by_name()[entry["variant"]]
    script = variant_script(root / "build" / entry["variant"], """
registered = {name: [key for key in ("CPU", "CUDA")
                     if torch._C._dispatch_has_kernel_for_dispatch_key(f"{meta['id']}::{name}", key)]
              for name in ("forward", "scaled_sum", "positive_part")}
x = torch.tensor([3.0, -1.0, 0.5])
out = torch.empty_like(x)
ops.forward(x, 2.0, out)  # the CPU twin's kernel (the CUDA one refuses CPU tensors)
print(json.dumps({"registered": registered, "forward": out.tolist(), "scaled_sum": ops.scaled_sum(x, 2.0).item(),
                  "positive_part": ops.positive_part(x).tolist()}))
""")
    out = subprocess.run([ensure_toolchain(planned.toolchain).python, "-c", script], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    # every function answers what its module answered: CPU tensors everywhere, CUDA ones in the cuda variant
    assert answer["registered"] == {"forward": ["CPU", "CUDA"], "scaled_sum": ["CPU", "CUDA"],
                                    "positive_part": ["CPU", "CUDA"]}
    assert answer["forward"] == [6.0, -2.0, 1.0] and answer["scaled_sum"] == 5.0
    assert answer["positive_part"] == [3.0, 0.0, 0.5]
