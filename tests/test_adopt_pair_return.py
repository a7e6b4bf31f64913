"""A pybind11 binding of the torch 1.x days (torch-points-kernels' form): a
function returning `std::pair<at::Tensor, at::Tensor>`, arguments named with
pybind11's `"x"_a` literals under `using namespace pybind11::literals;`. The
op returns `(Tensor, Tensor)` through a shim (the dispatcher returns tuples,
not pairs), the literals' using-directive is guarded with pybind11, and the
built kernel returns what the function computes."""

from __future__ import annotations

import json

import pytest
import torch

from adopt_fixtures import write
from cli_helper import run_cli
from matrix_fixtures import write_local_matrix

SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="extrema", packages=["extrema"],
      ext_modules=[CppExtension("extrema._C", ["csrc/extrema.cpp"])], cmdclass={"build_ext": BuildExtension})
"""

SOURCE = """\
#include <torch/extension.h>
#include <utility>

using namespace pybind11::literals;

std::pair<at::Tensor, at::Tensor> extrema(const at::Tensor& x, int64_t dim) {
  return std::make_pair(std::get<0>(x.min(dim)), std::get<0>(x.max(dim)));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("extrema", &extrema, "the minimum and maximum along dim", "x"_a, "dim"_a);
}
"""


def _project(root):
    return write(root, {"setup.py": SETUP, "csrc/extrema.cpp": SOURCE, "extrema/__init__.py": "from ._C import extrema\n",
                        "LICENSE": "MIT License\n\nPermission is hereby granted, free of charge\n"})


def _adopt(root) -> dict:
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 0, done.output
    return json.loads(done.stdout)


def test_a_pair_return_is_a_tuple_op_and_the_literals_are_guarded(tmp_path):
    root = _project(tmp_path / "extrema")
    report = _adopt(root)
    assert {op["name"]: op["schema"] for op in report["ops"]} == {"extrema": "extrema(Tensor x, int dim) -> (Tensor, Tensor)"}
    assert not [f for f in report["findings"] if f["severity"] == "error"], report["findings"]
    ported = (root / "csrc/extrema.cpp").read_text()
    assert "return std::make_tuple(result.first, result.second);" in ported
    guarded = ported.split("using namespace pybind11::literals;")[0].rsplit("\n", 2)[-2]
    assert guarded.startswith("#ifndef Py_LIMITED_API")  # only where pybind11 compiles
    assert run_cli("check", str(root)).returncode == 0


@pytest.mark.slow
def test_the_built_op_returns_what_the_function_computes(tmp_path):
    root = _project(tmp_path / "extrema")
    _adopt(root)
    write_local_matrix(root / "matrix.yaml", compute="cpu")
    built = run_cli("build", str(root), "--local", "--json", timeout=1200)
    assert built.returncode == 0, built.output
    import kernels

    module = kernels.get_local_kernel(root / "build", backend="cpu")
    x = torch.randn(5, 7)
    low, high = module.extrema(x, 1)
    assert torch.equal(low, x.min(1).values) and torch.equal(high, x.max(1).values)
    tested = run_cli("test", str(root), "--json", timeout=1200)
    (variant,) = json.loads(tested.stdout)["variants"].values()
    assert tested.returncode == 0 and variant["status"] == "passed", variant
