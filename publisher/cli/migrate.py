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
@click.option("--sources", is_flag=True,
              help="Also rewrite removed torch APIs where the replacement is exact: C++ (THC, AT_CHECK, .data<T>()...) "
                   "in the sources the build compiles, Python (torch._six) in the kernel's package; shows the diff and "
                   "what is left for hands.")
def command(path: Path, check_only: bool, show_diff: bool, license_: str | None, version: int | None,
            sources: bool) -> int:
    """Rewrite the build.toml in PATH (v1-v4) as edition 5 and repair what upstream's parser refuses
    where the meaning is plain (e.g. "13" -> "13.0"), keeping comments and key order."""
    options = MigrateOptions(path=path, check_only=check_only, show_diff=show_diff, license=license_, version=version,
                             sources=sources)
    return render(run_migrate(options))


def render(result: MigrateResult) -> int:
    """What was found or done, and what is left for hands; the exit code (1: --check
    found work, or errors remain)."""
    options, migration = result.options, result.migration
    if migration is None:
        click.echo(f"{options.path}: {result.error.render()}")
        return EXIT_FAILED
    failed = _build_toml(result)
    if result.port is not None:
        failed = _sources(result) or failed
    if result.problems:
        click.echo("\nleft for hands (`publisher check` still refuses these; migrate does not guess):")
        click.echo(render_human(list(result.problems)))
        failed = True
    return EXIT_FAILED if failed or (options.check_only and result.needed) else EXIT_OK


def _build_toml(result: MigrateResult) -> bool:
    options, migration = result.options, result.migration
    if not migration.needed:
        if result.problems:
            click.echo(f"{migration.path}: nothing migrate can change without guessing what you meant")
        elif result.port is None:
            click.echo(f"{migration.path}: already edition 5, nothing to do")
        return False
    if options.show_diff:
        click.echo(migration.diff(), nl=False)
    if options.check_only:
        click.echo(f"{migration.path}: {'needs migrating' if migration.era != editions.V5 else 'needs repairs'}:")
    elif result.written:
        done = f"migrated from {migration.era} to edition 5" if migration.era != editions.V5 else "repaired"
        click.echo(f"{migration.path}: {done}")
    if options.check_only or result.written:
        for change in migration.changes:
            click.echo(f"  - {change}")
    return False


def _languages(uses) -> str:
    found = {"Python" if u.file.endswith(".py") else "C++" for u in uses}
    return " and ".join(sorted(found, key=["C++", "Python"].index))


def _sources(result: MigrateResult) -> bool:
    """The port's diff, what it did, what it left; True when uses are left."""
    port = result.port
    if port.changed:
        click.echo(port.diff(), nl=False)
        verb = "ported" if result.written else "would port"
        click.echo(f"{verb} {len(port.ported)} use(s) of removed torch {_languages(port.ported)} APIs in "
                   f"{len(port.changed)} source(s)")
    elif not port.left:
        click.echo("sources: no removed torch API in what the build compiles or the kernel's Python package")
    if port.left:
        click.echo("\nsources left for hands (no exact replacement):")
        for use in port.left:
            click.echo(f"  {use.file}:{use.line}: {use.api.name}\n      fix: {use.fix()}")
    return bool(port.left)
