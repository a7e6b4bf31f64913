"""`publisher migrate PATH`: upgrade a legacy build.toml to edition 5.
The stage is publisher/project/stage.py; this module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.errors import EXIT_FAILED, EXIT_OK
from publisher.findings import render_human
from publisher.options import MigrateOptions
from publisher.project import editions
from publisher.project.stage import MigrateResult, run_migrate


@click.command("migrate")
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--check", "check_only", is_flag=True, help="Change nothing; exit 1 if the file needs migrating.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the change as a unified diff instead of writing it.")
@click.option("--license", "license_", metavar="ID", help="License to add when the old file has none (e.g. apache-2.0).")
@click.option("--version", "version", type=click.IntRange(min=0), metavar="N",
              help="Kernel version to add when the old file has none (the Hub branch v<N>).")
def command(path: Path, check_only: bool, show_diff: bool, license_: str | None, version: int | None) -> int:
    """Rewrite the build.toml in PATH (v1-v4) as edition 5 and repair what upstream's parser refuses
    where the meaning is plain (e.g. "13" -> "13.0"), keeping comments and key order."""
    options = MigrateOptions(path=path, check_only=check_only, show_diff=show_diff, license=license_, version=version)
    return render(run_migrate(options))


def render(result: MigrateResult) -> int:
    """What was found or done, and what is left for hands; the exit code (1: --check
    found work, or errors remain)."""
    options, migration = result.options, result.migration
    if migration is None:
        click.echo(f"{options.path}: {result.error.render()}")
        return EXIT_FAILED
    if not migration.needed:
        if not result.problems:
            click.echo(f"{migration.path}: already edition 5, nothing to do")
            return EXIT_OK
        click.echo(f"{migration.path}: nothing migrate can change without guessing what you meant")
        return _left(result)
    if options.show_diff:
        click.echo(migration.diff(), nl=False)
    done = f"migrated from {migration.era} to edition 5" if migration.era != editions.V5 else "repaired"
    if options.check_only:
        click.echo(f"{migration.path}: {'needs migrating' if migration.era != editions.V5 else 'needs repairs'}:")
    elif result.written:
        click.echo(f"{migration.path}: {done}")
    if options.check_only or result.written:
        for change in migration.changes:
            click.echo(f"  - {change}")
    if result.problems:
        return _left(result)
    return EXIT_FAILED if options.check_only else EXIT_OK


def _left(result: MigrateResult) -> int:
    click.echo("\nleft for hands (`publisher check` still refuses these; migrate does not guess):")
    click.echo(render_human(list(result.problems)))
    return EXIT_FAILED
