"""The one version-bounds rule (publisher/project/versions.py), and check and
plan agreeing on it cell by cell."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from publisher.plan.matrix import load_matrix
from publisher.plan.planner import make_plan
from publisher.project.load import load_project
from publisher.project.versions import parse_version, within

MATRIX = """
schema: 1
indexes: {cu: https://example.invalid/whl/cu}
toolkits:
  cuda:
    "12.6": ["7.5", "8.0", "9.0+PTX"]
    "12.8": ["7.5", "8.0", "9.0", "12.0+PTX"]
    "13.0": ["7.5", "8.0", "9.0", "12.1+PTX"]
    "13.2": ["7.5", "8.0", "9.0", "12.1+PTX"]
torch:
  - version: "2.15"
    flavours:
      - {compute: cu126, platforms: [x86_64-linux], source: cu}
      - {compute: cu128, platforms: [x86_64-linux], source: cu}
      - {compute: cu130, platforms: [x86_64-linux]}
      - {compute: cu132, platforms: [x86_64-linux], source: cu}
"""

BUILD = """
[general]
name = "demo"
version = 1
edition = 5
license = "MIT"
backends = ["cuda"]
[general.cuda]
{bounds}
[torch]
src = ["torch-ext/torch_binding.cpp"]
[kernel.demo]
backend = "cuda"
depends = ["torch"]
src = ["k.cu"]
"""

# (minver, maxver); "12" is the case check and plan used to read differently
BOUNDS = [(None, None), (None, "12"), (None, "12.8"), (None, "13"), (None, "13.0.0"), ("12.8", None),
          ("12.8.1", None), ("13", None), ("12", "13"), ("12.6", "12.9"), ("11", "12.6"), ("13.2", "13.2"), (None, "11")]


@pytest.mark.parametrize("version,minver,maxver,inside", [
    ("12.8", None, "12", False),  # upstream: 12.8 > 12 (kernels-data Version, CMake VERSION_GREATER)
    ("12.0", None, "12", True),  # trailing zeros do not count
    ("13.0", "13", "13.0.0", True),
    ("2.14", "2.14.1", None, False),
    ("2.14", None, "2.14.1", True),
    ("12.8", "not-a-version", None, True),  # a bad bound is check's PB210, not a filter
    ("garbage", None, None, False),
])
def test_within_compares_whole_versions(version, minver, maxver, inside):
    assert within(version, minver, maxver) is inside


def test_parse_version_drops_trailing_zeros_and_refuses_junk():
    assert parse_version("13.0.0") == parse_version("13") == (13,)
    assert parse_version("12.x") is None and parse_version(12) is None


def _check_toolkits(findings) -> set[str]:
    built = [f for f in findings if f.code == "PB305"]
    return set(re.findall(r"CUDA (\d+(?:\.\d+)*):", built[0].message)) if built else set()


@pytest.mark.parametrize("minver,maxver", BOUNDS)
def test_check_accepts_exactly_the_cells_plan_builds(tmp_path: Path, minver, maxver):
    lines = [f'{key} = "{value}"' for key, value in (("minver", minver), ("maxver", maxver)) if value]
    (tmp_path / "build.toml").write_text(BUILD.format(bounds="\n".join(lines)))
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    project, findings = load_project(tmp_path, layout=False, matrix=tmp_path / "matrix.yaml")
    assert project is not None, findings
    matrix = load_matrix(tmp_path / "matrix.yaml")
    plan = make_plan(project, matrix)
    toolkit = {cell.compute: cell.toolkit for cell in matrix.cells}
    planned = {toolkit[d.compute] for d in plan.decisions if d.included}
    accepted = _check_toolkits(findings)
    assert accepted == planned
    assert bool(accepted) != any(f.code == "PB307" for f in findings)  # check warns exactly when nothing is built
