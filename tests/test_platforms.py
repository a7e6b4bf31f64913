"""Platforms: architecture-specific cxx-flags keep a kernel off the platforms
they cannot compile for (the plan says why, `check` warns PB502), and
publisher.toml `platforms` restricts a project to the platforms it names."""

from __future__ import annotations

import json

import pytest

from publisher.plan.matrix import load_matrix
from publisher.project.load import require_project
from publisher.push import coverage

from build_fixtures import write_tiny_project
from cli_helper import run_cli


def _with_cpu_flags(root, *flags: str):
    project = write_tiny_project(root)
    toml = project / "build.toml"
    listed = ", ".join(f'"{f}"' for f in flags)
    toml.write_text(toml.read_text().replace(
        'src = ["scale_cpu/scale.cpp", "scale_cpu/scale.h"]\n',
        f'src = ["scale_cpu/scale.cpp", "scale_cpu/scale.h"]\ncxx-flags = ["-O3", {listed}]\n'))
    return project


def _cells(project) -> dict[tuple[str, str, str], str]:
    """(torch, compute, platform) -> 'in' or the rule that left it out, from `publisher matrix --explain`."""
    out = run_cli("matrix", str(project), "--explain")
    assert out.returncode == 0, out.stdout + out.stderr
    cells = {}
    for line in out.stdout.split("Every cell of the matrix:")[1].splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0] == "torch":
            cells[(parts[1], parts[2], parts[3])] = "in" if parts[4] == "in" else parts[5].strip("[]")
    return cells, out.stdout


@pytest.mark.parametrize("flag, allowed_cpu", [("-mavx2", "x86_64"), ("-march=armv8.2-a+sve", "aarch64")])
def test_arch_flags_leave_out_the_platforms_they_cannot_compile_for(tmp_path, flag, allowed_cpu):
    project = _with_cpu_flags(tmp_path / "tiny", flag)
    cells, text = _cells(project)
    cpu_cells = {k: v for k, v in cells.items() if k[1] == "cpu"}
    assert cpu_cells and all((v == "in") == k[2].startswith(allowed_cpu + "-") for k, v in cpu_cells.items()), cpu_cells
    assert all(v == "arch-flags" for k, v in cpu_cells.items() if not k[2].startswith(allowed_cpu + "-"))
    assert f"kernel.scale_cpu.cxx-flags: {flag} compiles for {allowed_cpu} only" in text
    # The flags belong to the CPU kernel: the CUDA cells of every platform stay.
    assert {k[2] for k, v in cells.items() if k[1].startswith("cu") and v == "in"} == {"x86_64-linux", "aarch64-linux"}

    checked = run_cli("check", str(project), "--format", "json")
    assert checked.returncode == 0, checked.stdout
    (warning,) = [f for f in json.loads(checked.stdout)["findings"] if f["code"] == "PB502"]
    assert warning["severity"] == "warning" and warning["field"] == "kernel.scale_cpu.cxx-flags"
    assert f"`{flag}` compiles for {allowed_cpu} only" in warning["message"] and warning["line"] is not None
    assert "publisher.toml" in warning["hint"]

    # The release gate asks for no variant the plan cannot build.
    required = coverage.required_variants(require_project(project), load_matrix())
    assert required and all(p.startswith(allowed_cpu + "-") for n, p in required.items() if "-cpu-" in n)


def test_publisher_toml_restricts_platforms_and_silences_the_warning(tmp_path):
    project = _with_cpu_flags(tmp_path / "tiny", "-mavx512f", "-mavx512bf16")
    (project / "publisher.toml").write_text('platforms = ["x86_64-linux"]\n')
    cells, text = _cells(project)
    assert {k[2] for k, v in cells.items() if v == "in"} == {"x86_64-linux"}
    declared = {k: v for k, v in cells.items() if k[1] == "cpu" or k[1].startswith("cu")}
    assert {v for k, v in declared.items() if k[2] != "x86_64-linux"} == {"platform-not-selected"}
    assert "not in publisher.toml platforms (x86_64-linux)" in text
    checked = run_cli("check", str(project), "--format", "json")
    assert checked.returncode == 0
    assert not [f for f in json.loads(checked.stdout)["findings"] if f["code"] == "PB502"]


@pytest.mark.parametrize("text, message", [
    ('platforms = ["x86_64-macos"]\n', "unknown platform 'x86_64-macos'"),
    ('platforms = "x86_64-linux"\n', "`platforms` must be a non-empty list"),
    ('systems = ["x86_64-linux"]\n', "unknown key `systems`"),
    ('platforms = [\n', "cannot be read"),
])
def test_invalid_publisher_toml_is_a_located_error(tmp_path, text, message):
    project = write_tiny_project(tmp_path / "tiny")
    (project / "publisher.toml").write_text(text)
    checked = run_cli("check", str(project), "--format", "json")
    assert checked.returncode == 1, checked.stdout
    (error,) = [f for f in json.loads(checked.stdout)["findings"] if f["code"] == "PB501"]
    assert message in error["message"] and error["file"].endswith("publisher.toml") and error["hint"]
    built = run_cli("build", str(project), "--local")
    assert built.returncode == 1 and "publisher.toml" in built.stderr and message in built.stderr
    assert "Traceback" not in built.stderr
