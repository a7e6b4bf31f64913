"""Running many variants: keep going past failures by default, stop with
--fail-fast, report an unavailable toolchain with its reason."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from publisher import state
from publisher.backends import get_backend
from publisher.builder.backend import BuildOptions
from publisher.builder.scheduler import Scheduler, default_budget
from publisher.plan.planner import PlannedVariant
from publisher.plan.variants import Platform, Variant
from publisher.project.load import require_project
from publisher.toolchains.spec import ToolchainSpec
from publisher.ui import PlainLines

from build_fixtures import write_tiny_project

TORCH = ".".join(torch.__version__.split("+")[0].split(".")[:2])


def _local(framework: str) -> PlannedVariant:
    spec = ToolchainSpec(TORCH, "cpu", "x86_64-linux", None, f"torch=={torch.__version__}", python=sys.executable)
    return PlannedVariant(Variant(framework, TORCH, "cpu", Platform("x86_64", "linux")), spec, required=False)


def _darwin() -> PlannedVariant:
    spec = ToolchainSpec(TORCH, "cpu", "aarch64-darwin", None, f"torch=={TORCH}.*")
    return PlannedVariant(Variant("torch", TORCH, "cpu", Platform("aarch64", "darwin")), spec, required=True)


def _broken_project(tmp_path):
    root = write_tiny_project(tmp_path / "broken")
    scale = root / "scale_cpu" / "scale.cpp"
    scale.write_text("#error deliberately broken\n" + scale.read_text())
    return require_project(root)


def _run(project, planned, fail_fast=False):
    options = BuildOptions(jobs=1, cores=1)
    sched = Scheduler(project, get_backend("local", project), project.root / "build", options, PlainLines(sys.stderr),
                      fail_fast=fail_fast)
    return {r.variant: r for r in sched.run(planned)}


@pytest.mark.slow
def test_keep_going_builds_every_variant_and_reports_each(tmp_path):
    project = _broken_project(tmp_path)
    planned = [_local("torch"), _darwin(), _local("torch-stable-abi")]
    results = _run(project, planned)
    assert [results[p.name].state for p in planned] == ["failed", "unavailable", "failed"]
    assert "deliberately broken" in results[planned[0].name].error
    assert "aarch64-darwin" in results[planned[1].name].reason
    report = state.read_report(state.build_report_path(project.root / "build"))["variants"]
    assert {name: e["state"] for name, e in report.items()} == {p.name: results[p.name].state for p in planned}
    assert not (project.root / "build" / planned[0].name).exists()


@pytest.mark.slow
def test_fail_fast_stops_after_the_first_failure(tmp_path):
    project = _broken_project(tmp_path)
    planned = [_local("torch"), _local("torch-stable-abi")]
    results = _run(project, planned, fail_fast=True)
    assert results[planned[0].name].state == "failed"
    assert results[planned[1].name].state == "cancelled"


def test_default_budget_respects_cores_and_explicit_values():
    planned = [_local("torch"), _local("torch-stable-abi")]
    jobs, cores = default_budget(planned, None, None)
    assert jobs >= 1 and cores >= 1
    assert jobs * cores <= max(2, os.cpu_count() or 1)
    assert default_budget(planned, 2, 3) == (2, 3)
    assert default_budget(planned, 2, None)[0] == 2
