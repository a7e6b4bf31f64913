"""Matrices the tests name explicitly: the machine matrices shipped in matrices/
and one made for the torch that runs the tests (whichever it is)."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.plan.planner import local_cell
from publisher.plan.variants import Platform, Variant

__all__ = ["GPU_RUNNER_MATRIX", "local_cpu_variant_name", "local_matrix", "local_variant_name", "write_local_matrix"]

REPO = Path(__file__).resolve().parents[1]
GPU_RUNNER_MATRIX = REPO / "matrices" / "gpu-runner-torch211-cu130.yaml"


def local_variant_name() -> str:
    """The torch variant `publisher build --local` makes with the running torch."""
    cell = local_cell()
    return Variant("torch", cell.torch, cell.compute, Platform.parse(cell.platform)).name


def local_cpu_variant_name() -> str:
    """The cpu variant `build --local` makes with the running torch, whatever its flavour."""
    cell = local_cell()
    return Variant("torch", cell.torch, "cpu", Platform.parse(cell.platform)).name


def write_local_matrix(path: Path, compute: str | None = None) -> Path:
    """A matrix whose one cell is the running torch (found as pip finds it here);
    `compute="cpu"`: the CPU cell of the running torch's version instead, whose
    variants that torch tests whatever its flavour."""
    cell = local_cell()
    requirement = f", requirement: \"{cell.torch_requirement}\"" if compute in (None, cell.compute) else ""
    path.write_text(
        "schema: 1\ntorch:\n"
        f"  - version: \"{cell.torch}\"\n    required: true\n    flavours:\n"
        f"      - {{compute: {compute or cell.compute}, platforms: [{cell.platform}]{requirement}}}\n"
    )
    return path


@pytest.fixture
def local_matrix(tmp_path) -> Path:
    return write_local_matrix(tmp_path / "local-matrix.yaml")


# PyPI's CUDA torch 2.14.1 (cu130) on x86_64 Linux: a CUDA variant compiled here (nvcc is installed; it need not run)
CU130_MATRIX = """\
schema: 1
torch:
  - version: "2.14"
    required: true
    flavours:
      - {compute: cu130, platforms: [x86_64-linux], source: pypi, requirement: "torch==2.14.1"}
"""
