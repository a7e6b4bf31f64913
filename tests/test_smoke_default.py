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


def test_torch_ops_registered_by_importing_inductor_do_not_fail_the_kernel(tmp_path):
    project = write_files(tmp_path / "tritonish", TRITONISH)
    built = run_cli("build", str(project), "--local", "--json")
    assert built.returncode == 0, built.stdout + built.stderr
    result = run_cli("test", str(project), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    entry = json.loads(result.stdout)["variants"]["torch-cpu"]
    assert entry["status"] == "passed"
    # The four default checks ran: loaded, its op under the build's namespace, the op and square(x) called.
    assert entry["tests"] == {"passed": 4, "failed": 0, "skipped": 0, "errors": 0}
    assert {c["target"]: c["outcome"] for c in entry["smoke"]} == {"op square": "exercised",
                                                                   "function square": "exercised"}
