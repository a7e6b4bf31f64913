"""`publisher check PATH`: everything wrong with a kernel project, before
anything compiles. Exit 0 without errors (warnings allowed), 1 with errors.
The stage is publisher/project/stage.py; this module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.cli.common import format_option
from publisher.cli.views import render_check
from publisher.options import CheckOptions
from publisher.project.stage import run_check


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
    return render_check(run_check(options), fmt)
