"""Fixtures for the bench-stage tests (imported by conftest.py): a Python-only
kernel (`twice`, built in a second as `torch-cpu` and `torch-cuda`) whose
functions misbehave in the ways a kernel can under a benchmark (a wrong
answer, an exception, a process that dies, one that never returns), and the
benchmark scripts that call them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helper import run_cli
from smoke_fixtures import write_files

__all__ = ["TWICE_REPO", "twice_project", "write_benchmarks"]

TWICE_REPO = "bench-org/twice"

TWICE_FILES = {
    "build.toml": f"""\
[general]
name = "twice"
version = 1
edition = 5
license = "MIT"
backends = ["cpu", "cuda"]

[general.hub]
repo-id = "{TWICE_REPO}"

[torch-noarch]
""",
    "torch-ext/twice/__init__.py": '''\
"""Doubles a tensor, and the ways a kernel goes wrong (publisher's bench tests)."""

import os
import time

import torch

__all__ = ["twice", "thrice", "refuse", "abort", "sleep"]


def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def thrice(x: torch.Tensor) -> torch.Tensor:
    return x * 3  # a wrong answer where twice is meant


def refuse(x: torch.Tensor) -> torch.Tensor:
    raise ValueError(f"refusing a tensor of shape {tuple(x.shape)}")


def abort(x: torch.Tensor) -> torch.Tensor:
    os.abort()  # the process dies, as it does on a segfault


def sleep(x: torch.Tensor) -> torch.Tensor:
    time.sleep(3600)
    return x
''',
}


def write_benchmarks(root: Path, scripts: dict[str, str]) -> Path:
    """Replace the project's benchmarks/ with `scripts` (file name -> source)."""
    folder = root / "benchmarks"
    if folder.is_dir():
        for old in folder.iterdir():
            old.unlink()
    return write_files(root, {f"benchmarks/{name}": text for name, text in scripts.items()})


@pytest.fixture(scope="session")
def built_twice(tmp_path_factory) -> Path:
    root = write_files(tmp_path_factory.mktemp("twice") / "twice", TWICE_FILES)
    result = run_cli("build", str(root), "--json")
    assert result.returncode == 0, result.output
    return root


@pytest.fixture
def twice_project(built_twice, fresh_copy) -> Path:
    """The built kernel, a copy each test may change (its benchmarks, its results)."""
    return fresh_copy(built_twice)
