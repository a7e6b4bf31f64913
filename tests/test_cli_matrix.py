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


def test_machine_matrices_are_named_explicitly():
    """The default matrix holds upstream policy only; a machine's cells come from its own file."""
    default = {r["variant"] for r in json.loads(run_cli("matrix", str(RMSNORM), "--json").stdout)}
    for path, variant in [("matrices/cpu-2.13.yaml", "torch213-cxx11-cpu-x86_64-linux"),
                          ("matrices/gpu-runner-torch211-cu130.yaml", "torch211-cxx11-cu130-x86_64-linux")]:
        out = run_cli("matrix", str(RMSNORM), "--json", "--matrix", str(ROOT / path))
        assert out.returncode == 0, out.stderr
        assert [r["variant"] for r in json.loads(out.stdout)] == [variant]
        assert variant not in default


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
