"""`publisher matrix PATH`: the variants a project needs, and why every other cell is left out."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.cli.common import echo_json
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.plan.planner import make_plan, select
from publisher.project.load import require_project
from publisher.plan.github_runners import assign, load_runners


@click.command("matrix")
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--explain", is_flag=True, help="Show every matrix cell, in or out, with the rule that decided it.")
@click.option("--json", "as_json", is_flag=True, help="Print a list GitHub Actions `strategy.matrix` can consume.")
@click.option("--github", "as_github", is_flag=True,
              help="Print release.yml's build jobs as JSON: each variant with the runner and backend that build it, "
                   "and where it is tested (test: here, gpu-runner or none).")
@click.option("--variant", "include", multiple=True, metavar="GLOB", help="Only variants matching GLOB (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out variants matching GLOB (repeatable).")
@click.option("--required-only", is_flag=True, help="Only cells the matrix marks required.")
@click.option("--matrix", "matrix_file", type=click.Path(path_type=Path), help="Matrix file (default: the project's matrix.yaml, else publisher's).")
def command(path: Path, explain: bool, as_json: bool, as_github: bool, include, skip, required_only: bool, matrix_file: Path | None) -> None:
    """List the variants the kernel in PATH needs."""
    matrix_path = find_matrix(path if path.is_dir() else None, matrix_file)
    project = require_project(path, matrix=matrix_path)
    matrix = load_matrix(matrix_path)
    plan = make_plan(project, matrix)
    chosen = [p for p in select(plan, include, skip) if p.required or not required_only]
    if as_github:
        runners = load_runners()
        echo_json([assign(p, runners).row() for p in chosen])
        return
    if as_json:
        echo_json([
            {
                "variant": p.name,
                "backend": p.backend,
                "torch": p.toolchain.torch,
                "compute": p.toolchain.compute,
                "platform": p.toolchain.platform,
                "required": p.required,
                "archs": list(p.archs),
            }
            for p in chosen
        ])
        return
    click.echo(f"{project.name} v{project.config.general.version}: {len(chosen)} variant(s)  [matrix: {matrix.path}]")
    width = max((len(p.name) for p in chosen), default=10)
    for p in chosen:
        archs = " ".join(p.archs)
        tag = "required" if p.required else "optional"
        click.echo(f"  {p.name:<{width}}  {tag:<8}  {archs}")
        if explain and p.kernel_archs:
            for kernel, ka in p.kernel_archs.items():
                click.echo(f"  {'':<{width}}  {'':<8}  {kernel}: {' '.join(ka)}")
    if explain:
        click.echo("\nEvery cell of the matrix:")
        for d in plan.decisions:
            cell = f"torch {d.torch} {d.compute} {d.platform}"
            verdict = f"in   {d.variant}" if d.included else f"out  [{d.rule}] {d.reason}"
            click.echo(f"  {cell:<36} {verdict}")
