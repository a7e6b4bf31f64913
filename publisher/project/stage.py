"""The check and migrate stages as calls: options in, a result value out,
nothing printed. Used by `publisher check`, `publisher migrate` and `publisher release`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from publisher.errors import ProjectError
from publisher.findings import Finding, Severity
from publisher.options import CheckOptions, MigrateOptions
from publisher.project import editions
from publisher.project.load import load_project, tomllib
from publisher.project.migrate import Migration, plan_migration, remaining_problems
from publisher.project.model import Project
from publisher.project.port import SourcePort, plan_port
from publisher.project.rewrite import replace_texts


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
    port: SourcePort | None = None  # with --sources: the rewrites of removed torch APIs (C++ and Python)

    @property
    def needed(self) -> bool:
        return (self.migration is not None and self.migration.needed) or bool(self.port and self.port.changed)


def run_migrate(options: MigrateOptions) -> MigrateResult:
    """Plan the migration (and, with --sources, the port of the sources); write
    both at once unless --check or --diff asks only to show them."""
    try:
        migration = plan_migration(options.path, license=options.license, version=options.version)
    except ProjectError as err:
        if not options.check_only:
            raise
        return MigrateResult(options, error=err)
    problems = tuple(remaining_problems(migration))
    port = _plan_port(migration) if options.sources else None
    result = MigrateResult(options, migration, problems=problems, port=port)
    if not result.needed or options.check_only or options.show_diff:
        return result
    texts = {migration.path: migration.migrated} if migration.needed else {}
    replace_texts({**texts, **(port.texts() if port else {})})
    return replace(result, written=True)


def _plan_port(migration: Migration) -> SourcePort:
    data = tomllib.loads(migration.migrated)
    if editions.detect(data).era != editions.V5:
        raise ProjectError(f"{migration.path}: the sources are found through build.toml, which is not edition 5 yet",
                           "run `publisher migrate` on build.toml first (it says what it needs)")
    return plan_port(migration.path.parent, data)
