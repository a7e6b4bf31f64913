"""The plan stage: which cells of the matrix a project needs, and why the rest are out."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.errors import ProjectError, UsageError
from publisher.plan.matrix import load_matrix
from publisher.plan.planner import make_plan, select
from publisher.project.load import load_project, require_project

MATRIX = """
schema: 1
indexes: {cu: https://example.invalid/whl/cu126}
toolkits:
  cuda:
    "12.6": ["7.0", "7.5", "8.0", "8.6", "8.9", "9.0+PTX"]
    "13.0": ["7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX"]
torch:
  - version: "2.15"
    required: true
    flavours:
      - {compute: cpu, platforms: [x86_64-linux, aarch64-darwin]}
      - {compute: cu130, platforms: [x86_64-linux]}
      - {compute: cu126, platforms: [x86_64-linux], source: cu}
  - version: "2.14"
    required: true
    flavours:
      - {compute: cu130, platforms: [x86_64-linux]}
  - version: "2.11"
    flavours:
      - {compute: cu130, platforms: [x86_64-linux]}
"""


BUILD = """
[general]
name = "demo"
version = 1
edition = 5
license = "MIT"
backends = {backends}
{general_extra}
[torch]
src = ["torch-ext/torch_binding.cpp"]
{torch_extra}
[kernel.demo_cuda]
backend = "cuda"
depends = ["torch"]
src = ["k.cu"]
{kernel_extra}
[kernel.demo_cpu]
backend = "cpu"
depends = ["torch"]
src = ["k.cpp"]
"""


def load_matrix_from_text(tmp_path: Path, text: str):
    path = tmp_path / "plan-matrix.yaml"
    path.write_text(text)
    return load_matrix(path)


def project(tmp_path: Path, general_extra: str = "", torch_extra: str = "", kernel_extra: str = "", backends='["cpu", "cuda"]'):
    (tmp_path / "build.toml").write_text(
        BUILD.format(general_extra=general_extra, torch_extra=torch_extra, kernel_extra=kernel_extra, backends=backends)
    )
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    return make_plan(require_project(tmp_path / "build.toml", matrix=tmp_path / "matrix.yaml"), load_matrix(tmp_path / "matrix.yaml"))


def decision(plan, torch, compute, platform="x86_64-linux"):
    return next(d for d in plan.decisions if (d.torch, d.compute, d.platform) == (torch, compute, platform))


def test_every_cell_has_a_decision_and_included_cells_have_variants(tmp_path):
    plan = project(tmp_path)
    assert len(plan.decisions) == 6
    names = {p.name for p in plan.variants}
    assert names == {d.variant for d in plan.decisions if d.included}
    assert "torch215-cpu-aarch64-darwin" in names  # darwin: no cxx11 tag
    assert "torch211-cxx11-cu130-x86_64-linux" in names


def test_backend_not_declared(tmp_path):
    plan = project(tmp_path, backends='["cuda"]')
    d = decision(plan, "2.15", "cpu")
    assert not d.included and d.rule == "backend-not-declared"


def test_torch_bounds(tmp_path):
    plan = project(tmp_path, torch_extra='minver = "2.14"')
    d = decision(plan, "2.11", "cu130")
    assert not d.included and d.rule == "torch-bounds" and "2.14" in d.reason
    assert decision(plan, "2.14", "cu130").included


def test_cuda_bounds(tmp_path):
    plan = project(tmp_path, general_extra='[general.cuda]\nminver = "12.8"')
    d = decision(plan, "2.15", "cu126")
    assert not d.included and d.rule == "cuda-bounds"
    assert decision(plan, "2.15", "cu130").included


def test_capabilities_are_intersected_per_toolkit(tmp_path):
    plan = project(tmp_path, kernel_extra='cuda-capabilities = ["9.0", "10.0"]')
    by_name = plan.by_name()
    assert "10.0" in by_name["torch215-cxx11-cu130-x86_64-linux"].archs
    assert "10.0" not in by_name["torch215-cxx11-cu126-x86_64-linux"].archs


def test_empty_capabilities_are_a_check_error_naming_kernel_and_toolkit(tmp_path):
    with pytest.raises(ProjectError) as err:
        project(tmp_path, kernel_extra='cuda-capabilities = ["12.0"]')
    assert "demo_cuda" in err.value.message and "12.6" in err.value.message


def test_plan_leaves_out_a_cell_whose_kernel_has_no_archs(tmp_path):
    # The project is valid against a matrix without CUDA 12.6; planned against one with it,
    # the 12.6 cell is left out with the kernel named rather than failing at compile time.
    (tmp_path / "build.toml").write_text(BUILD.format(general_extra="", torch_extra="",
                                                      kernel_extra='cuda-capabilities = ["12.0"]', backends='["cuda"]'))
    (tmp_path / "matrix.yaml").write_text(MATRIX.replace('"12.6": ["7.0", "7.5", "8.0", "8.6", "8.9", "9.0+PTX"]', '"12.6": ["12.0"]'))
    proj = require_project(tmp_path / "build.toml", matrix=tmp_path / "matrix.yaml")
    plan = make_plan(proj, load_matrix_from_text(tmp_path, MATRIX))
    d = decision(plan, "2.15", "cu126")
    assert not d.included and d.rule == "empty-archs" and "demo_cuda" in d.reason


def test_stable_abi_builds_each_flavour_once(tmp_path):
    plan = project(tmp_path, torch_extra='[torch.stable-abi]\ncuda = "2.14"')
    names = [p.name for p in plan.variants]
    assert names.count("torch-stable-abi214-cu130-x86_64-linux") == 1
    assert plan.by_name()["torch-stable-abi214-cu130-x86_64-linux"].toolchain.torch == "2.15"
    assert decision(plan, "2.14", "cu130").rule == "stable-abi-shared"
    assert decision(plan, "2.11", "cu130").rule == "stable-abi-too-old"
    assert "torch215-cxx11-cpu-x86_64-linux" in names  # cpu is not stable-ABI here


def test_select_globs(tmp_path):
    plan = project(tmp_path)
    chosen = select(plan, ["torch215-*-cu13*"], [])
    assert [p.name for p in chosen] == ["torch215-cxx11-cu130-x86_64-linux"]
    assert all("cu" not in p.name for p in select(plan, [], ["*-cu*"]))
    with pytest.raises(UsageError):
        select(plan, ["nothing-*"], [])


def test_noarch_projects_get_torch_backend_variants(tmp_path):
    (tmp_path / "build.toml").write_text("""
[general]
name = "pyonly"
version = 2
edition = 5
license = "MIT"
backends = ["cpu", "cuda"]
[torch-noarch]
[kernel]
""")
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    proj, _ = load_project(tmp_path / "build.toml")
    plan = make_plan(proj, load_matrix(tmp_path / "matrix.yaml"))
    assert [p.name for p in plan.variants] == ["torch-cpu", "torch-cuda"]
    assert plan.by_name()["torch-cuda"].toolchain.compute.startswith("cu")


CUDA_ONLY_MATRIX = """\
schema: 1
torch:
  - version: "2.14"
    flavours:
      - {compute: cu130, platforms: [x86_64-linux]}
"""


@pytest.mark.parametrize("backends, tested_with", [('["cpu"]', "cu130"), ('["rocm"]', None)])
def test_noarch_variant_is_tested_with_a_cell_whose_torch_runs_it(tmp_path, backends, tested_with):
    """A CUDA torch runs torch-cpu; nothing in a CUDA-only matrix runs torch-rocm: a finding, not a crash."""
    (tmp_path / "build.toml").write_text(f"""
[general]
name = "pyonly"
version = 2
edition = 5
license = "MIT"
backends = {backends}
[torch-noarch]
""")
    proj, _ = load_project(tmp_path / "build.toml")
    matrix = load_matrix_from_text(tmp_path, CUDA_ONLY_MATRIX)
    if tested_with is None:
        with pytest.raises(ProjectError, match="no cell whose torch can test torch-rocm"):
            make_plan(proj, matrix)
    else:
        assert make_plan(proj, matrix).by_name()["torch-cpu"].toolchain.compute == tested_with


def test_default_matrix_has_the_required_upstream_cells():
    matrix = load_matrix()
    required = {(c.torch, c.compute, c.platform) for c in matrix.cells if c.required}
    torches = sorted({c.torch for c in matrix.cells if c.required})
    assert len(torches) == 2
    for torch in torches:
        for compute in ("cpu", "cu126", "cu130", "cu132"):
            assert (torch, compute, "x86_64-linux") in required
            assert (torch, compute, "aarch64-linux") in required
        assert (torch, "metal", "aarch64-darwin") in required
    assert all(c.required for c in matrix.cells)  # a machine's own cells live in matrices/


def test_broken_matrix_is_a_usage_error(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("schema: 1\ntorch:\n  - version: '2.15'\n    flavours:\n      - {compute: quantum, platforms: [x86_64-linux]}\n")
    with pytest.raises(UsageError) as err:
        load_matrix(bad)
    assert "quantum" in str(err.value.message)


def test_local_build_outside_the_named_matrix_is_flagged(tmp_path, local_matrix):
    """--local builds the running torch's variants (its flavour, and its cpu variant for a project
    declaring cpu); a matrix without that cell is said so (build warns)."""
    from publisher.plan.planner import local_plan

    from matrix_fixtures import local_cpu_variant_name, local_variant_name

    local_names = list(dict.fromkeys([local_variant_name(), local_cpu_variant_name()]))

    proj_dir = tmp_path / "p"
    proj_dir.mkdir()
    project(proj_dir)
    proj = require_project(proj_dir / "build.toml")
    inside = local_plan(proj, load_matrix(local_matrix))
    assert [p.name for p in inside.variants] == local_names and inside.decisions[0].rule == "included"
    elsewhere = load_matrix_from_text(tmp_path, "schema: 1\ntorch:\n  - version: '1.0'\n    flavours:\n"
                                                "      - {compute: cpu, platforms: [x86_64-linux]}\n")
    outside = local_plan(proj, elsewhere)
    assert [p.name for p in outside.variants] == local_names
    assert all(d.rule == "not-in-matrix" and str(elsewhere.path) in d.reason for d in outside.decisions)
