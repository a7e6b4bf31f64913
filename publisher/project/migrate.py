"""`publisher migrate`: rewrite a legacy build.toml (v1-v4) as edition 5, and
repair what upstream's parser refuses where the meaning is plain.

The file is edited through tomlkit, so comments, key order and formatting of
everything that does not change survive. The rules themselves live in
publisher.project.upgrade and are the same ones `check` applies in memory."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

from publisher.errors import MigrationRefused, ProjectError
from publisher.findings import Finding
from publisher.project import editions
from publisher.project.load import (
    foreign,
    matrix_toolkits,
    place_findings,
    read_toml,
    resolve,
    tomllib,
    upstream_last_word,
    validate,
)
from publisher.project.upgrade import repair, upgrade


@dataclass(frozen=True)
class Migration:
    path: Path
    era: str  # the edition the file was written in (editions.V3, ...)
    original: str
    migrated: str
    changes: tuple[str, ...]

    @property
    def needed(self) -> bool:
        return self.migrated != self.original

    def diff(self) -> str:
        return "".join(difflib.unified_diff(
            self.original.splitlines(keepends=True), self.migrated.splitlines(keepends=True),
            fromfile=f"{self.path} (before)", tofile=f"{self.path} (edition 5)"))


def migrate_text(text: str, data: dict, *, license: str | None = None, version: int | None = None) -> tuple[str, str, list[str]]:
    """(new text, era, changes) for TOML `text` whose parsed form is `data`:
    upgraded to edition 5, and what upstream's parser refuses repaired where
    the meaning is plain (both keep comments and order)."""
    edition = editions.detect(data)
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as err:
        raise ProjectError(f"cannot edit the file: {err}", "fix the TOML syntax first") from None
    try:
        changes = upgrade(doc, edition, license=license, version=version, new_table=tomlkit.table)
    except MigrationRefused as err:
        raise ProjectError(f"cannot migrate ({edition.era} format): {err.message}", err.hint) from None
    changes += repair(doc, new_table=tomlkit.table)
    return (tomlkit.dumps(doc) if changes else text), edition.era, changes


def plan_migration(path: Path, *, license: str | None = None, version: int | None = None) -> Migration:
    """Compute the migration of the build.toml at `path` (a folder or the file) without writing."""
    build_toml, _ = resolve(path)
    text, data, problems = read_toml(build_toml)
    if data is None or text is None:
        problem = problems[0]
        where = f"{problem.file}:{problem.line}" if problem.line else str(problem.file)
        raise ProjectError(f"{where}: {problem.message}", problem.hint)
    not_ours = foreign(data)
    if not_ours:
        raise ProjectError(f"{build_toml}: cannot migrate: {not_ours[0].message}", not_ours[0].hint)
    migrated, era, changes = migrate_text(text, data, license=license, version=version)
    return Migration(build_toml, era, text, migrated, tuple(changes))


def remaining_problems(migration: Migration) -> list[Finding]:
    """Errors `check` still reports on the migrated text (config only; upstream's
    parser has the last word): what is left for hands, and why."""
    own_matrix = migration.path.parent / "matrix.yaml"  # as `check` reads the project
    cuda, rocm = matrix_toolkits(own_matrix if own_matrix.is_file() else None)
    data = tomllib.loads(migration.migrated)
    findings, _, _ = validate(data, cuda, rocm)
    findings = place_findings(findings, data, migration.migrated, str(migration.path))
    findings += upstream_last_word(findings, migration.migrated, str(migration.path))
    return [f for f in findings if f.is_error]
