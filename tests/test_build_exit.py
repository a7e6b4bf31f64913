"""`publisher build --variant X` fails when X was not built (here: no toolchain
for it), instead of exiting 0 with nothing built."""

from __future__ import annotations

import json

from build_fixtures import write_tiny_project
from cli_helper import run_cli

ABSENT_TORCH = """\
schema: 1
torch:
  - version: "2.99"
    required: true
    flavours:
      - {compute: cpu, platforms: [x86_64-linux, aarch64-linux], source: pypi}
"""


def test_requested_variant_not_built_is_a_failure(tmp_path):
    project = write_tiny_project(tmp_path / "tiny")
    matrix = tmp_path / "absent.yaml"
    matrix.write_text(ABSENT_TORCH)
    result = run_cli("build", str(project), "--matrix", str(matrix), "--variant", "torch299-*-x86_64-linux", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    (row,) = json.loads(result.stdout)["variants"]
    assert row["state"] == "unavailable" and "torch==2.99" in row["reason"]
    assert "Traceback" not in result.stderr
