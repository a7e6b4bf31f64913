"""The check and migrate stages as calls: options in, a result value out,
nothing printed. Used by `publisher check`, `publisher migrate` and `publisher release`."""

from __future__ import annotations

from dataclasses import dataclass

from publisher.errors import ProjectError
from publisher.findings import Finding, Severity
from publisher.options import CheckOptions, MigrateOptions
from publisher.project.load import load_project
from publisher.project.migrate import Migration, plan_migration, remaining_problems, write
from publisher.project.model import Project


@dataclass(frozen=True)
class CheckResult:
    options: CheckOptions
    project: Project | None  # None when build.toml has errors
    findings: tuple[Finding, ...]


def run_check(options: CheckOptions) -> CheckResult:
    project, findings = load_project(options.path, layout=not options.config_only, matrix=options.matrix_file)
    if options.quiet:
        findings = [f for f in findings if f.severity is not Severity.INFO]
    return CheckResult(options, project, tuple(findings))


@dataclass(frozen=True)
class MigrateResult:
    options: MigrateOptions
    migration: Migration | None = None  # None: the file cannot be migrated (see error)
    error: ProjectError | None = None  # only with --check, which reports it instead of stopping
    written: bool = False
    problems: tuple[Finding, ...] = ()  # errors `check` still reports on the migrated text: left for hands


def run_migrate(options: MigrateOptions) -> MigrateResult:
    """Plan the migration; write it unless --check or --diff asks only to show it."""
    try:
        migration = plan_migration(options.path, license=options.license, version=options.version)
    except ProjectError as err:
        if not options.check_only:
            raise
        return MigrateResult(options, error=err)
    problems = tuple(remaining_problems(migration))
    if not migration.needed or options.check_only or options.show_diff:
        return MigrateResult(options, migration, problems=problems)
    write(migration)
    return MigrateResult(options, migration, written=True, problems=problems)
