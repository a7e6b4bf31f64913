"""The default smoke test (a project without tests/) judges the kernel's own op
namespace only: torch's lazily registered ops never count against it."""

from __future__ import annotations

import json

import pytest

from cli_helper import run_cli
from smoke_fixtures import write_files

pytestmark = pytest.mark.slow

# A Triton-style Python-only kernel: importing torch._inductor (as Triton kernels
# and their helpers do) registers dozens of torch-owned ops (prims::, c10d_functional::, ...).
TRITONISH = {
    "build.toml": '[general]\nname = "tritonish"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
                  'backends = ["cpu"]\n\n[torch-noarch]\n',
    "torch-ext/tritonish/__init__.py": '''\
import torch
import torch._inductor  # noqa: F401  (what triton kernels pull in)

from ._ops import add_op_namespace_prefix, ops

__all__ = ["square"]


@torch.library.custom_op(add_op_namespace_prefix("square"), mutates_args=())
def _square(x: torch.Tensor) -> torch.Tensor:
    return x * x


def square(x: torch.Tensor) -> torch.Tensor:
    return ops.square(x)
''',
}


def _build_and_test(project) -> dict:
    """build --local, test: the one variant's test entry (the test run must succeed)."""
    built = run_cli("build", str(project), "--local", "--json")
    assert built.returncode == 0, built.stdout + built.stderr
    result = run_cli("test", str(project), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    (entry,) = json.loads(result.stdout)["variants"].values()
    return entry


def test_torch_ops_registered_by_importing_inductor_do_not_fail_the_kernel(tmp_path):
    entry = _build_and_test(write_files(tmp_path / "tritonish", TRITONISH))
    assert entry["status"] == "passed"
    # The four default checks ran: loaded, its op under the build's namespace, the op and square(x) called.
    assert entry["tests"] == {"passed": 4, "failed": 0, "skipped": 0, "errors": 0}
    assert {c["target"]: c["outcome"] for c in entry["smoke"]} == {"op square": "exercised",
                                                                   "function square": "exercised"}


# An op the schema alone cannot be called from (an int, an index tensor the op checks), which the
# package's own layer calls the right way: the shape of deformable-detr's and layer-norm's layers.
PICKED = {
    "build.toml": '[general]\nname = "picked"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n'
                  '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n\n'
                  '[kernel.picked_cpu]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["picked_cpu/picked.cpp"]\n',
    "torch-ext/torch_binding.cpp": """\
#include <torch/all.h>
#include <torch/library.h>

#include "registration.h"

at::Tensor pick_rows(const at::Tensor& src, const at::Tensor& index, int64_t block);

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("pick_rows(Tensor src, Tensor index,"
          "          int block) -> Tensor");
  ops.impl("pick_rows", torch::kCPU, &pick_rows);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
""",
    "picked_cpu/picked.cpp": """\
#include <torch/all.h>

at::Tensor pick_rows(const at::Tensor& src, const at::Tensor& index, int64_t block) {
  TORCH_CHECK(index.scalar_type() == at::ScalarType::Long, "index must be int64");
  TORCH_CHECK(index.dim() == 1, "index must be 1-d");
  TORCH_CHECK(block > 0 && src.size(0) % block == 0, "block must divide the rows");
  return src.index_select(0, index);
}
""",
    "torch-ext/picked/__init__.py": "from . import layers\nfrom ._ops import ops\n\n__all__ = [\"layers\"]\n",
    "torch-ext/picked/layers.py": '''\
import torch
import torch.nn as nn

from ._ops import ops


class PickRows(nn.Module):
    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        index = torch.zeros(hidden.shape[0], dtype=torch.long, device=hidden.device)
        return ops.pick_rows(hidden, index, 2)
''',
}


def test_an_op_is_called_with_the_arguments_its_package_gives_it(tmp_path):
    entry = _build_and_test(write_files(tmp_path / "picked", PICKED))
    calls = {c["target"]: c for c in entry["smoke"]}
    # its schema has an int: no guess calls it; the layer's call gives the int, the index dtype, the shapes
    assert calls["op pick_rows"]["outcome"] == "exercised", calls
    assert "the call at layers.py:10" in calls["op pick_rows"]["detail"]
    assert "2" in calls["op pick_rows"]["inputs"].split(", ")[-1]
    assert entry["status"] == "passed"
