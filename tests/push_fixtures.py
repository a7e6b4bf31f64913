"""Fixtures for push tests (imported by conftest.py): a small Python-only kernel
project built once per session with the real `publisher build --local` and
tested with the real `publisher test` (torch-cpu; torch-cuda has no test
environment on this machine), then copied fresh for each test; a helper to run
the `kernels` client in a separate process."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from cli_helper import run_cli
from hub_fixtures import TRUSTED_ORG

__all__ = ["built_scale", "scale_project", "load_kernel", "write_scale", "repo_name", "build"]

BUILD_TOML = """\
[general]
name = "scale"
version = {version}
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[torch-noarch]
pyext = ["py", "bin"]
"""

INIT = '''\
"""Multiply by a constant: a tiny Python-only kernel for the push tests."""

import torch

from ._ops import ops  # noqa: F401

__all__ = ["scale"]


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor{extra}
'''

TEST = '''\
import torch
from kernels import get_kernel


def test_scale():
    k = get_kernel("publisher-test/scale", version={version})
    assert torch.equal(k.scale(torch.ones(3), 2.0), torch.full((3,), 2.0))
'''


def write_scale(root: Path, version: int = 1, extra: str = "") -> None:
    """The project's sources; `extra` is appended to scale() to make a different build."""
    pkg = root / "torch-ext" / "scale"
    pkg.mkdir(parents=True, exist_ok=True)
    (root / "tests").mkdir(exist_ok=True)
    (root / "build.toml").write_text(BUILD_TOML.format(version=version))
    (pkg / "__init__.py").write_text(INIT.format(extra=extra))
    (pkg / "table.bin").write_bytes(bytes(range(256)) * 64)  # binary: travels through LFS
    (root / "tests" / "test_scale.py").write_text(TEST.format(version=version))


def build(root: Path, env: dict, *extra: str) -> None:
    result = run_cli("build", "--local", *extra, str(root), env=env)
    assert result.returncode == 0, result.stdout + result.stderr


def load_kernel(env: dict, code: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (the real kernels client, HF_ENDPOINT from env)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def repo_name(kind: str = "scale", owner: str = TRUSTED_ORG) -> str:
    """A new repo id; by default under the org the test run's server marks trusted (the bare get_kernel loads it)."""
    return f"{owner}/{kind}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def built_scale(tmp_path_factory, hub) -> Path:
    root = tmp_path_factory.mktemp("scale-built") / "scale"
    write_scale(root)
    env = hub.env()
    build(root, env)
    tested = run_cli("test", "--variant", "torch-cpu", str(root), env=env)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    return root


@pytest.fixture
def scale_project(built_scale, tmp_path) -> Path:
    dest = tmp_path / "scale"
    shutil.copytree(built_scale, dest, symlinks=True)
    return dest
