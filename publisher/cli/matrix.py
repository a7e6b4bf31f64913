"""`publisher matrix PATH`: the variants a project needs, and why every other cell is left out.
The stage is publisher/plan/stage.py; this module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.cli.common import echo_json
from publisher.options import MatrixOptions, Selection
from publisher.plan.stage import MatrixResult, run_matrix


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
    options = MatrixOptions(path=path, selection=Selection(tuple(include), tuple(skip)), required_only=required_only,
                            matrix_file=matrix_file)
    render(run_matrix(options), explain=explain, as_json=as_json, as_github=as_github)


def render(result: MatrixResult, *, explain: bool, as_json: bool, as_github: bool) -> None:
    """--github wins over --json, which wins over the table."""
    if as_github:
        echo_json(result.github_jobs())
    elif as_json:
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
            for p in result.chosen
        ])
    else:
        click.echo(render_table(result, explain))


def render_table(result: MatrixResult, explain: bool) -> str:
    project, chosen = result.project, result.chosen
    lines = [f"{project.name} v{project.config.general.version}: {len(chosen)} variant(s)  [matrix: {result.matrix.path}]"]
    width = max((len(p.name) for p in chosen), default=10)
    for p in chosen:
        tag = "required" if p.required else "optional"
        lines.append(f"  {p.name:<{width}}  {tag:<8}  {' '.join(p.archs)}")
        if explain and p.kernel_archs:
            for kernel, ka in p.kernel_archs.items():
                lines.append(f"  {'':<{width}}  {'':<8}  {kernel}: {' '.join(ka)}")
    if explain:
        lines.append("\nEvery cell of the matrix:")
        for d in result.plan.decisions:
            cell = f"torch {d.torch} {d.compute} {d.platform}"
            verdict = f"in   {d.variant}" if d.included else f"out  [{d.rule}] {d.reason}"
            lines.append(f"  {cell:<36} {verdict}")
    return "\n".join(lines)
