"""`publisher matrix` as a user and as a GitHub Actions plan job call it."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helper import run_cli

ROOT = Path(__file__).resolve().parents[1]
RMSNORM = ROOT / "kernel_projects" / "rmsnorm"


def test_json_is_a_list_a_strategy_matrix_can_consume():
    out = run_cli("matrix", str(RMSNORM), "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows and all({"variant", "backend", "torch", "platform"} <= set(r) for r in rows)
    names = [r["variant"] for r in rows]
    # PyPI's one CUDA flavour of each release, on both Linux CPUs
    assert {"torch214-cxx11-cu130-x86_64-linux", "torch215-cxx11-cu132-aarch64-linux"} <= set(names)
    assert len(names) == len(set(names))


MACHINE_MATRIX = """\
schema: 1
indexes:
  pytorch-cpu: https://download.pytorch.org/whl/cpu
torch:
  - version: "2.12"
    required: true
    flavours:
      - {compute: cpu, platforms: [x86_64-linux], source: pytorch-cpu, requirement: "torch==2.12.0+cpu"}
"""


def test_machine_matrices_are_named_explicitly(tmp_path):
    """The default matrix holds upstream policy only; a machine's cells come from its own file."""
    from publisher.plan.matrix import load_matrix

    default = {r["variant"] for r in json.loads(run_cli("matrix", str(RMSNORM), "--json").stdout)}
    machine = tmp_path / "machine.yaml"  # a machine's own torch (a hypothetical 2.12 CPU wheel)
    machine.write_text(MACHINE_MATRIX)
    out = run_cli("matrix", str(RMSNORM), "--json", "--matrix", str(machine))
    assert out.returncode == 0, out.stderr
    assert [r["variant"] for r in json.loads(out.stdout)] == ["torch212-cxx11-cpu-x86_64-linux"]
    assert "torch212-cxx11-cpu-x86_64-linux" not in default
    # the repository's machine matrices (this project's dev/CI machine, its GPU test box): each gives the
    # variants of its own cells, none of which the default matrix holds
    files = sorted((ROOT / "matrices").glob("*.yaml"))
    assert files
    for path in files:
        cells = {(c.torch, c.compute, c.platform) for c in load_matrix(path).cells}
        out = run_cli("matrix", str(RMSNORM), "--json", "--matrix", str(path))
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)
        assert rows and all((r["torch"], r["compute"], r["platform"]) in cells for r in rows), (path, rows)
        assert not {r["variant"] for r in rows} & default, path


def test_explain_accounts_for_every_cell():
    out = run_cli("matrix", str(RMSNORM), "--explain")
    assert out.returncode == 0, out.stderr
    cells = [line for line in out.stdout.splitlines() if line.strip().startswith("torch ")]
    from publisher.plan.matrix import load_matrix

    assert len(cells) == len(load_matrix().cells)
    assert any(" out  [backend-not-declared]" in line for line in cells)


def test_glob_selection_and_usage_errors():
    out = run_cli("matrix", str(RMSNORM), "--json", "--variant", "torch21?-cxx11-cu130-*", "--skip", "*aarch64*")
    assert out.returncode == 0, out.stderr
    assert {r["variant"] for r in json.loads(out.stdout)} == {"torch214-cxx11-cu130-x86_64-linux", "torch215-cxx11-cu130-x86_64-linux"}
    assert all("aarch64" not in r["variant"] for r in json.loads(out.stdout))
    bad = run_cli("matrix", str(RMSNORM), "--variant", "nope-*")
    assert bad.returncode == 2 and "no variant matches" in bad.stderr and "Traceback" not in bad.stderr
    missing = run_cli("matrix", "/nonexistent/project")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
