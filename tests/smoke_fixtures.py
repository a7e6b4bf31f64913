"""Fixtures for the test-stage tests (imported by conftest.py): a deliberately
broken CPU kernel built once per session with the real `publisher build`
(three ops in one .so: a wrong result, a segfault, a hang; the project's
test calls the op named by $BROKEN_OP), its CUDA variant for torch 2.11 +
cu130 built on demand, and a Python-only kernel."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_helper import run_cli
from matrix_fixtures import GPU_RUNNER_MATRIX

__all__ = [
    "BROKEN_REPO", "CUDA_VARIANT", "broken_project", "broken_cuda_project", "noarch_project",
    "fresh_copy", "write_broken", "write_files", "write_noarch",
]

BROKEN_REPO = "test-org/broken"
CUDA_VARIANT = "torch211-cxx11-cu130-x86_64-linux"

BROKEN_FILES = {
    "build.toml": f"""\
[general]
name = "broken"
version = 1
edition = 5
license = "MIT"
backends = ["cpu", "cuda"]

[general.hub]
repo-id = "{BROKEN_REPO}"

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.broken_cpu]
backend = "cpu"
depends = ["torch"]
src = ["broken_cpu/broken.cpp"]

[kernel.broken_cuda]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["9.0"]
src = ["broken_cuda/broken.cpp"]
""",
    "torch-ext/torch_binding.cpp": """\
#include <torch/library.h>

#include "registration.h"

at::Tensor doubled(const at::Tensor& x);
at::Tensor crash(const at::Tensor& x);
at::Tensor hang(const at::Tensor& x);

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("doubled(Tensor x) -> Tensor");
  ops.def("crash(Tensor x) -> Tensor");
  ops.def("hang(Tensor x) -> Tensor");
}

#if defined(CUDA_KERNEL)
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {
#else
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
#endif
  ops.impl("doubled", &doubled);
  ops.impl("crash", &crash);
  ops.impl("hang", &hang);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
""",
    # Each op misbehaves in one way a kernel can.
    "broken_cpu/broken.cpp": """\
#include <torch/all.h>

at::Tensor doubled(const at::Tensor& x) { return x * 3; }  // wrong: should be x * 2

at::Tensor crash(const at::Tensor& x) {
  volatile int* p = nullptr;
  *p = 1;  // segfault
  return x;
}

at::Tensor hang(const at::Tensor& x) {
  volatile bool spin = true;  // volatile: the compiler may not drop the loop
  while (spin) {
  }
  return x;
}
""",
    # Host code only: the variant is a CUDA build (CUDA torch, CUDA dispatch key,
    # archs in metadata) without nvcc's minutes; its device code is not under test.
    "broken_cuda/broken.cpp": """\
#include <torch/all.h>

at::Tensor doubled(const at::Tensor& x) { return x * 3; }

at::Tensor crash(const at::Tensor& x) {
  volatile int* p = nullptr;
  *p = 1;
  return x;
}

at::Tensor hang(const at::Tensor& x) {
  volatile bool spin = true;
  while (spin) {
  }
  return x;
}
""",
    "torch-ext/broken/__init__.py": '''\
"""A kernel that is wrong in three ways (publisher's test-stage tests)."""

from ._ops import ops

__all__ = ["doubled", "crash", "hang"]


def doubled(x):
    return ops.doubled(x)


def crash(x):
    return ops.crash(x)


def hang(x):
    return ops.hang(x)
''',
    "tests/test_broken.py": f'''\
import os

import kernels
import pytest
import torch

broken = kernels.get_kernel("{BROKEN_REPO}", version=1)


@pytest.mark.kernels_ci
def test_op_doubles(device):
    op = getattr(broken, os.environ.get("BROKEN_OP", "doubled"))
    x = torch.arange(4.0, device=device)
    torch.testing.assert_close(op(x), x * 2)
''',
}

NOARCH_FILES = {
    "build.toml": """\
[general]
name = "halve"
version = 1
edition = 5
license = "MIT"
backends = ["cpu"]

[torch-noarch]
""",
    "torch-ext/halve/__init__.py": '''\
"""Halve a tensor: a Python-only kernel whose op lives under the build's namespace."""

import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["halve"]


@torch.library.custom_op(add_op_namespace_prefix("halve"), mutates_args=())
def _halve(x: torch.Tensor) -> torch.Tensor:
    return x / 2


def halve(x: torch.Tensor) -> torch.Tensor:
    return ops.halve(x)
''',
}


def write_files(root: Path, files: dict[str, str], tests: bool = True) -> Path:
    for rel, text in files.items():
        if rel.startswith("tests/") and not tests:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def write_broken(root: Path, tests: bool = True) -> Path:
    return write_files(root, BROKEN_FILES, tests)


def write_noarch(root: Path) -> Path:
    return write_files(root, NOARCH_FILES)


def _build(root: Path, *args: str) -> None:
    result = run_cli("build", str(root), "--json", *args)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="session")
def broken_project(tmp_path_factory) -> Path:
    """The broken kernel, the CPU variant of the running torch built (--local, whatever
    its flavour: only the cpu variant, no CUDA compile); read-only for tests."""
    root = write_broken(tmp_path_factory.mktemp("broken") / "broken")
    _build(root, "--local", "--variant", "*-cpu-*")
    return root


@pytest.fixture(scope="session")
def broken_cuda_project(broken_project) -> Path:
    """The broken kernel with its torch 2.11 + CUDA 13.0 variant built beside the CPU one."""
    result = run_cli("build", str(broken_project), "--matrix", str(GPU_RUNNER_MATRIX), "--variant", CUDA_VARIANT, "--json")
    if result.returncode != 0:
        rows = json.loads(result.stdout or "{}").get("variants", []) if result.stdout.startswith("{") else []
        if any(r.get("state") == "unavailable" for r in rows):
            pytest.skip(f"no torch 2.11 + cu130 toolchain here: {rows}")
        pytest.fail(result.stdout + result.stderr)
    return broken_project


@pytest.fixture(scope="session")
def noarch_project(tmp_path_factory) -> Path:
    root = write_noarch(tmp_path_factory.mktemp("noarch") / "halve")
    _build(root, "--local")
    return root


@pytest.fixture
def fresh_copy(tmp_path):
    """Copy a built project so a test can change it (or its report) freely."""

    def copy(project: Path) -> Path:
        dest = tmp_path / project.name
        shutil.copytree(project, dest, symlinks=True)
        return dest

    return copy
