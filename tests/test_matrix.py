"""matrix.yaml files: the default is upstream policy only; a machine's matrix
leans on the default's toolkit table."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.errors import UsageError
from publisher.plan.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[1]


def test_default_matrix_is_the_latest_two_releases_all_required():
    matrix = load_matrix()
    releases = sorted({c.torch for c in matrix.cells}, key=lambda v: tuple(map(int, v.split("."))))
    assert len(releases) == 2 and all(c.required for c in matrix.cells)
    for release in releases:
        # PyPI serves one CUDA flavour per release on Linux; every other Linux flavour names PyTorch's index
        pypi_linux = {c.compute for c in matrix.cells if c.torch == release and c.index_url is None and c.platform.endswith("-linux")}
        assert len(pypi_linux) == 1 and pypi_linux.pop().startswith("cu")
        assert all(c.index_url is None for c in matrix.cells if c.torch == release and c.platform.endswith("-darwin"))
        assert not any("+" in c.torch_requirement for c in matrix.cells)  # no local wheel tags


def test_machine_matrix_takes_toolkit_defaults_from_the_default(tmp_path):
    gpu = load_matrix(ROOT / "matrices" / "gpu-runner-torch211-cu130.yaml")
    (cell,) = gpu.cells
    assert (cell.torch, cell.compute, cell.index_url, cell.torch_requirement) == ("2.11", "cu130", None, "torch==2.11.0")
    assert gpu.toolkit_archs(cell) == load_matrix().toolkit_archs(cell) and gpu.toolkit_archs(cell)
    (cpu,) = load_matrix(ROOT / "matrices" / "cpu-2.13.yaml").cells
    assert cpu.index_url == "https://download.pytorch.org/whl/cpu" and cpu.torch_requirement == "torch==2.13.0+cpu"


def test_a_matrix_file_must_hold_valid_cells(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("schema: 1\ntorch:\n  - version: '2.15'\n    flavours:\n      - {compute: cu130, platforms: [x86_64-linux], source: nowhere}\n")
    with pytest.raises(UsageError, match="unknown source 'nowhere'"):
        load_matrix(bad)
