"""`publisher migrate PATH`: upgrade a legacy build.toml to edition 5.
The stage is publisher/project/stage.py; this module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.errors import EXIT_FAILED, EXIT_OK
from publisher.findings import render_human
from publisher.options import MigrateOptions
from publisher.project.stage import MigrateResult, run_migrate


@click.command("migrate")
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--check", "check_only", is_flag=True, help="Change nothing; exit 1 if the file needs migrating.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the change as a unified diff instead of writing it.")
@click.option("--license", "license_", metavar="ID", help="License to add when the old file has none (e.g. apache-2.0).")
@click.option("--version", "version", type=click.IntRange(min=0), metavar="N",
              help="Kernel version to add when the old file has none (the Hub branch v<N>).")
def command(path: Path, check_only: bool, show_diff: bool, license_: str | None, version: int | None) -> int:
    """Rewrite the build.toml in PATH (v1-v4) as edition 5, keeping comments and key order."""
    options = MigrateOptions(path=path, check_only=check_only, show_diff=show_diff, license=license_, version=version)
    return render(run_migrate(options))


def render(result: MigrateResult) -> int:
    """What was found or done; the exit code (1: --check found work, or errors remain after writing)."""
    options, migration = result.options, result.migration
    if migration is None:
        click.echo(f"{options.path}: {result.error.render()}")
        return EXIT_FAILED
    if not migration.needed:
        click.echo(f"{migration.path}: already edition 5, nothing to do")
        return EXIT_OK
    if options.show_diff:
        click.echo(migration.diff(), nl=False)
    if options.check_only:
        click.echo(f"{migration.path}: {migration.era} format, needs migrating:")
        for change in migration.changes:
            click.echo(f"  - {change}")
        return EXIT_FAILED
    if not result.written:
        return EXIT_OK
    click.echo(f"{migration.path}: migrated from {migration.era} to edition 5")
    for change in migration.changes:
        click.echo(f"  - {change}")
    if result.problems:
        click.echo("\n`publisher check` still reports errors migrate cannot fix:")
        click.echo(render_human(list(result.problems)))
        return EXIT_FAILED
    return EXIT_OK
