"""`publisher migrate PATH`: upgrade a legacy build.toml to edition 5."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.errors import EXIT_FAILED, EXIT_OK, ProjectError
from publisher.findings import render_human
from publisher.project.migrate import plan_migration, remaining_problems, write


@click.command("migrate")
@click.argument("path", type=click.Path(path_type=Path), default=".")
@click.option("--check", "check_only", is_flag=True, help="Change nothing; exit 1 if the file needs migrating.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the change as a unified diff instead of writing it.")
@click.option("--license", "license_", metavar="ID", help="License to add when the old file has none (e.g. apache-2.0).")
@click.option("--version", "version", type=click.IntRange(min=0), metavar="N",
              help="Kernel version to add when the old file has none (the Hub branch v<N>).")
def command(path: Path, check_only: bool, show_diff: bool, license_: str | None, version: int | None) -> int:
    """Rewrite the build.toml in PATH (v1-v4) as edition 5, keeping comments and key order."""
    try:
        migration = plan_migration(path, license=license_, version=version)
    except ProjectError as err:
        if not check_only:
            raise
        click.echo(f"{path}: {err.render()}")
        return EXIT_FAILED
    if not migration.needed:
        click.echo(f"{migration.path}: already edition 5, nothing to do")
        return EXIT_OK
    if show_diff:
        click.echo(migration.diff(), nl=False)
    if check_only or show_diff:
        if check_only:
            click.echo(f"{migration.path}: {migration.era} format, needs migrating:")
            for change in migration.changes:
                click.echo(f"  - {change}")
        return EXIT_FAILED if check_only else EXIT_OK
    write(migration)
    click.echo(f"{migration.path}: migrated from {migration.era} to edition 5")
    for change in migration.changes:
        click.echo(f"  - {change}")
    problems = remaining_problems(migration)
    if problems:
        click.echo("\n`publisher check` still reports errors migrate cannot fix:")
        click.echo(render_human(problems))
        return EXIT_FAILED
    return EXIT_OK
