"""`publisher check PATH`: everything wrong with a kernel project, before
anything compiles. Exit 0 without errors (warnings allowed), 1 with errors.
The stage is publisher/project/stage.py; this module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.cli.common import format_option
from publisher.errors import EXIT_FAILED, EXIT_OK
from publisher.findings import has_errors, render_human, render_json
from publisher.options import CheckOptions
from publisher.project.stage import CheckResult, run_check


@click.command("check")
@click.argument("path", type=click.Path(path_type=Path), default=".")
@format_option
@click.option("--config-only", is_flag=True, help="Check build.toml only, even when PATH is a project folder.")
@click.option("--quiet", "-q", is_flag=True, help="Leave out info findings (architectures per toolkit).")
@click.option("--matrix", "matrix_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Matrix whose CUDA/ROCm toolkits the architecture checks use (default: the project's matrix.yaml, else publisher's).")
def command(path: Path, fmt: str, config_only: bool, quiet: bool, matrix_file: Path | None) -> int:
    """Check the build.toml (and, for a folder, the layout) of the kernel project in PATH."""
    options = CheckOptions(path=path, config_only=config_only, quiet=quiet, matrix_file=matrix_file)
    return render(run_check(options), fmt)


def render(result: CheckResult, fmt: str) -> int:
    """The findings (text or JSON) and the verdict; the exit code."""
    path, project, findings = result.options.path, result.project, list(result.findings)
    failed = has_errors(findings)
    if fmt == "json":
        click.echo(render_json(findings, path=str(path), ok=not failed,
                               name=project.name if project else None,
                               edition=project.config.edition if project else None))
    else:
        if findings:
            click.echo(render_human(findings))
        if project is not None:
            kind = "folder" if project.root is not None and not result.options.config_only else "build.toml"
            click.echo(f"{project.name} v{project.config.general.version}: {kind} OK")
        elif not failed:
            click.echo("OK")
    return EXIT_FAILED if failed else EXIT_OK
