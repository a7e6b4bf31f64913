"""The one version-bounds rule (publisher/project/versions.py), and check and
plan agreeing on it cell by cell."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from publisher.plan.matrix import load_matrix
from publisher.plan.planner import make_plan
from publisher.project.load import load_project
from publisher.project.versions import parse_version, two_part_repair, within

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

# (minver, maxver), every one a bound upstream reads (MAJOR.MINOR)
BOUNDS = [(None, None), (None, "12.0"), (None, "12.8"), (None, "13.0"), ("12.8", None), ("12.9", None),
          ("13.0", None), ("12.0", "13.0"), ("12.6", "12.9"), ("11.0", "12.6"), ("13.2", "13.2"), (None, "11.0")]


@pytest.mark.parametrize("version,minver,maxver,inside", [
    ("12.8", None, "12.0", False),  # upstream: 12.8 > 12.0
    ("12.0", None, "12.0", True),
    ("13.0", "13.0", "13.0", True),
    ("2.14", "2.15", None, False),
    ("2.14", None, "2.14", True),
    ("12.8", None, "12", True),  # a bound upstream refuses is check's PB109, not a filter
    ("12.8", "12.9.0", None, True),
    ("garbage", None, None, False),
])
def test_within_compares_major_minor(version, minver, maxver, inside):
    assert within(version, minver, maxver) is inside


def test_parse_version_reads_exactly_two_parts_as_upstream():
    assert parse_version("13.0") == (13, 0) and parse_version(" 2.13 ") == (2, 13)
    assert parse_version("13") is None and parse_version("13.0.0") is None and parse_version("2.13.0") is None
    assert parse_version("12.x") is None and parse_version(12) is None and parse_version("١٢.8") is None


@pytest.mark.parametrize("text,repair", [("13", "13.0"), ("2", "2.0"), ("2.13.0", "2.13"), ("13.0.0", "13.0"),
                                         ("+12", "12.0"), ("12.8.1", None), ("12.8", None), ("12.x", None)])
def test_two_part_repair_only_where_the_meaning_is_kept(text, repair):
    assert two_part_repair(text) == repair


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


@pytest.mark.parametrize("field,value", [("general.cuda", 'minver = "13"'), ("general.cuda", 'maxver = "12.8.0"')])
def test_check_refuses_bounds_upstream_refuses_with_the_fix(tmp_path: Path, field, value):
    (tmp_path / "build.toml").write_text(BUILD.format(bounds=value))
    project, findings = load_project(tmp_path, layout=False)
    assert project is None
    [bound] = [f for f in findings if f.code == "PB109"]
    key = value.split(" ")[0]
    assert bound.field == f"{field}.{key}" and bound.line == BUILD.format(bounds=value).splitlines().index(value) + 1
    assert bound.hint.startswith('write "13.0"' if key == "minver" else 'write "12.8"')
