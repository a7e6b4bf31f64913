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
    # a machine's own matrix (hypothetical torch 2.12 wheels): no toolkit table of its own
    machine = tmp_path / "machine.yaml"
    machine.write_text(
        "schema: 1\nindexes:\n  pytorch-cpu: https://download.pytorch.org/whl/cpu\ntorch:\n"
        "  - version: '2.12'\n    required: true\n    flavours:\n"
        "      - {compute: cu130, platforms: [x86_64-linux], source: pypi, requirement: 'torch==2.12.0'}\n"
        "      - {compute: cpu, platforms: [x86_64-linux], source: pytorch-cpu, requirement: 'torch==2.12.0+cpu'}\n")
    gpu, cpu = sorted(load_matrix(machine).cells, key=lambda c: c.compute != "cu130")
    assert (gpu.torch, gpu.compute, gpu.index_url, gpu.torch_requirement) == ("2.12", "cu130", None, "torch==2.12.0")
    assert load_matrix(machine).toolkit_archs(gpu) == load_matrix().toolkit_archs(gpu) and load_matrix(machine).toolkit_archs(gpu)
    assert cpu.index_url == "https://download.pytorch.org/whl/cpu" and cpu.torch_requirement == "torch==2.12.0+cpu"


def test_a_matrix_file_must_hold_valid_cells(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("schema: 1\ntorch:\n  - version: '2.15'\n    flavours:\n      - {compute: cu130, platforms: [x86_64-linux], source: nowhere}\n")
    with pytest.raises(UsageError, match="unknown source 'nowhere'"):
        load_matrix(bad)


@pytest.mark.parametrize("version, toolkit, problem", [
    ("'2.15.0'", "'13.0'", "torch version '2.15.0' must be a quoted MAJOR.MINOR"),
    ("2.15", "'13.0'", "torch version 2.15 must be a quoted MAJOR.MINOR"),  # a YAML float: 2.10 would read as 2.1
    ("'2.15'", "'13'", "toolkits.cuda: '13' must be a quoted MAJOR.MINOR"),
])
def test_matrix_versions_are_read_as_build_toml_bounds_are(tmp_path, version, toolkit, problem):
    bad = tmp_path / "m.yaml"
    bad.write_text(f"schema: 1\ntoolkits:\n  cuda:\n    {toolkit}: ['8.0']\ntorch:\n  - version: {version}\n"
                   "    flavours:\n      - {compute: cu130, platforms: [x86_64-linux]}\n")
    with pytest.raises(UsageError, match=problem.replace("(", r"\(").replace(".", r"\.")):
        load_matrix(bad)
