"""Entry point for reading a project: build.toml of any edition (validated as
edition 5, v4 upgraded in memory, older refused with a migrate hint), the GPU
architecture checks against the matrix's toolkits, and the folder layout."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from publisher.codes import finding
from publisher.errors import MigrationRefused, ProjectError, UsageError
from publisher.findings import Finding, Severity, has_errors, render_human
from publisher.project import editions, schema, upstream
from publisher.project.archs import check_archs
from publisher.project.convert import to_config
from publisher.project.layout import check_layout, file_kind, unusable
from publisher.project.locate import KeyLines
from publisher.project.model import Project
from publisher.project.platforms import platform_findings
from publisher.project.settings import read_settings
from publisher.project.torch_apis import removed_api_findings
from publisher.project.upgrade import upgrade
from publisher.project.values import check_values

MAX_BYTES = 4 * 1024 * 1024
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


@lru_cache(maxsize=8)
def _matrix(matrix_path: Path | None):
    from publisher.plan.matrix import find_matrix, load_matrix

    return load_matrix(find_matrix(None, matrix_path))


def matrix_toolkits(matrix_path: Path | None) -> tuple[dict, dict]:
    matrix = _matrix(matrix_path)
    return dict(matrix.cuda_toolkits), dict(matrix.rocm_toolkits)


def matrix_torches(matrix_path: Path | None) -> tuple[str, ...]:
    return tuple(sorted({cell.torch for cell in _matrix(matrix_path).cells}))


def resolve(path: Path) -> tuple[Path, Path | None]:
    """(build.toml, project root or None for a lone file); UsageError if absent."""
    path = Path(path)
    problem = unusable(str(path))
    if problem:
        raise UsageError(f"the path given {problem}", "pass a kernel project folder or a build.toml file")
    if path.is_dir():
        build_toml = path / "build.toml"
        kind = file_kind(build_toml)
        if not os.path.lexists(build_toml):
            raise UsageError(f"{path}: no build.toml in this folder", "pass a kernel project folder (it holds build.toml) or a build.toml file")
        if kind is not None:
            raise UsageError(f"{build_toml} is {kind}", "build.toml must be a regular file (or a symlink to one)")
        return build_toml, path
    if not os.path.lexists(path):
        raise UsageError(f"{path}: no such file or folder", "pass a kernel project folder or a build.toml file")
    kind = file_kind(path)
    if kind is not None:
        raise UsageError(f"{path} is {kind}", "pass a kernel project folder or a build.toml file")
    return path, None


def read_toml(build_toml: Path) -> tuple[str | None, dict | None, list[Finding]]:
    """(text, data, findings); data is None when the file is not usable TOML."""
    name = str(build_toml)
    try:
        raw = build_toml.read_bytes()
    except OSError as err:
        return None, None, [finding("PB100", f"cannot read the file: {err.strerror or err}", file=name, hint="check the path and its permissions")]
    if len(raw) > MAX_BYTES:
        return None, None, [finding("PB100", f"file is {len(raw) // 1024} KiB; a build.toml is a few KiB", file=name,
                                    hint=f"this is not a build.toml (limit {MAX_BYTES // (1024 * 1024)} MiB)")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        return None, None, [finding("PB100", "not UTF-8 text (binary data?)", file=name, line=line, hint="build.toml must be UTF-8 TOML")]
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = _TOML_POSITION.search(str(err))
        message = _TOML_POSITION.sub("", str(err)).strip()
        return text, None, [finding("PB100", f"invalid TOML: {message}", file=name, line=int(m[1]) if m else None,
                                    hint="fix the TOML syntax at that line")]
    except RecursionError:
        return text, None, [finding("PB100", "invalid TOML: values nested too deeply", file=name, hint="this is not a build.toml")]
    except ValueError:  # Python's limit on integer digits
        return text, None, [finding("PB100", "invalid TOML: an integer with more than 4300 digits", file=name,
                                    hint="TOML integers are 64-bit; fix the number")]
    return text, data, []


def validate(data: Mapping, cuda_toolkits: Mapping, rocm_toolkits: Mapping) -> tuple[list[Finding], dict | None, int]:
    """Findings for a parsed file, plus its edition-5 form (None if refused)
    and the edition it was written in."""
    not_ours = foreign(data)
    if not_ours:
        return not_ours, None, 0
    if "general" not in data:  # not a legacy file: the table every edition requires is missing
        return _validate_v5(data, 5, cuda_toolkits, rocm_toolkits), None, 0
    edition = editions.detect(data)
    if edition.era == editions.UNSUPPORTED:
        value = edition.edition
        if type(value) is int:
            return [finding("PB101", f"unsupported build edition {value}", field="general.edition",
                            hint="publisher reads edition 5 (and migrates v1-v4); set `edition = 5` and run `publisher check`")], None, 0
        return [finding("PB106", f"general.edition must be the integer 5, not {schema.type_name(value)}", field="general.edition",
                        hint="write `edition = 5`")], None, 0
    if edition.era == editions.V5:
        return _validate_v5(data, 5, cuda_toolkits, rocm_toolkits), dict(data), 5
    if edition.era == editions.V4:
        warning = finding("PB102", "build.toml has no `edition`: read as the legacy v4 format and upgraded to edition 5 in memory",
                          field="general", hint="run `publisher migrate PATH` to write edition 5 (keeps comments and order)")
        upgraded = copy.deepcopy(dict(data))
        if isinstance(upgraded.get("general"), dict):
            upgraded["general"]["edition"] = 5
        return [warning, *_validate_v5(data, 4, cuda_toolkits, rocm_toolkits)], upgraded, 4
    return _legacy(data, edition, cuda_toolkits, rocm_toolkits), None, 3


MINIMAL = ("a kernel-builder build.toml has a [general] table (name, version, edition = 5, license, backends) "
           "and one framework table: [torch] for compiled kernels, [torch-noarch] for Python-only ones")


def foreign(data: Mapping) -> list[Finding]:
    """An empty file, or one with none of kernel-builder's tables, is not a
    legacy build.toml to migrate: say what it is."""
    if not data:
        return [finding("PB108", "build.toml is empty (no tables, no keys)",
                        line=1, hint=MINIMAL)]
    if any(key in data for key in schema.TOP_LEVEL):
        return []
    tables = ", ".join(f"[{key}]" if isinstance(value, Mapping) else f"`{key}`" for key, value in data.items())
    return [finding("PB108", f"not a kernel-builder build.toml: it has none of the tables "
                    f"{', '.join(f'[{t}]' for t in schema.TOP_LEVEL)}; found {tables}", field=next(iter(data)),
                    hint="is this another tool's file? " + MINIMAL)]


def _validate_v5(data: Mapping, edition: int, cuda_toolkits, rocm_toolkits) -> list[Finding]:
    return schema.check_document(data, edition) + check_values(data) + check_archs(data, cuda_toolkits, rocm_toolkits)


def _legacy(data: Mapping, edition: editions.Edition, cuda_toolkits, rocm_toolkits) -> list[Finding]:
    """A v3-or-older file is refused; say why (each legacy key) and, by
    validating its migrated form, which problems migrate would not fix."""
    general = data.get("general") if isinstance(data.get("general"), Mapping) else {}
    missing = [k for k in ("license", "version") if k not in general]
    options = "".join(f" --{k} {'<license-id>' if k == 'license' else '<N>'}" for k in missing)
    pre_v1 = edition.era == editions.PRE_V1
    hint = ("cannot be migrated automatically: rewrite it as edition 5 by hand" if pre_v1
            else f"run `publisher migrate{options} PATH` to upgrade it to edition 5")
    out = [finding("PB103", f"legacy {edition.era} build.toml: {m.reason}", field=m.field, hint=hint) for m in edition.markers]
    out += schema.unknown_top_level(data)
    work = copy.deepcopy(dict(data))
    try:
        upgrade(work, edition, license=general.get("license") or "other", version=general.get("version", 1))
    except MigrationRefused as err:
        out.append(finding("PB103", f"legacy {edition.era} build.toml: {err.message}", field="general", hint=err.hint))
        return out + check_values(data)
    marked = {m.field for m in edition.markers}
    extra = [f for f in _validate_v5(work, 5, cuda_toolkits, rocm_toolkits)
             if f.field not in marked and f.severity is not Severity.INFO]
    return out + extra


def _lookup(data: Mapping, dotted: str) -> object:
    node: object = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def place_findings(findings: list[Finding], data: Mapping | None, text: str | None, file: str) -> list[Finding]:
    """Fill in file and line: the key's line, or the list item's line when the
    message names one of the items."""
    lines = KeyLines(text) if text is not None else None
    placed = []
    for f in findings:
        line = f.line
        if line is None and f.field and lines is not None:
            path = re.sub(r"\[\d+\]", "", f.field)
            value = _lookup(data, path) if data is not None else None
            items = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
            item = next((v for v in items if f"`{v}`" in f.message or f"'{v}'" in f.message or f" {v} " in f" {f.message} "), None)
            keys = tuple(path.split("."))
            line = (lines.value_line(keys, f'"{item}"') if item is not None else None) or lines.line(keys)
            line = line or 1  # a table the file does not have: it belongs at the top
        placed.append(replace(f, file=f.file or file, line=line))
    return placed


def load_project(path: Path, *, layout: bool = True, matrix: Path | None = None) -> tuple[Project | None, list[Finding]]:
    """Read `path` (a project folder or a build.toml). Returns the project
    (None when there are errors) and every finding. `matrix` overrides the
    matrix.yaml whose toolkits the architecture checks use."""
    build_toml, root = resolve(path)
    file = str(build_toml)
    text, data, findings = read_toml(build_toml)
    if data is None:
        return None, findings
    project_matrix = root / "matrix.yaml" if root and (root / "matrix.yaml").is_file() else None
    matrix_path = Path(matrix) if matrix else project_matrix
    cuda_toolkits, rocm_toolkits = matrix_toolkits(matrix_path)
    found, upgraded, written = validate(data, cuda_toolkits, rocm_toolkits)
    findings = place_findings(found, data, text, file) + upstream_last_word(found, text, file)
    if root is not None and layout and upgraded is not None:
        findings += place_findings(check_layout(root, upgraded, file), data, text, file)
        findings += removed_api_findings(root, upgraded, matrix_torches(matrix_path))
    settings, settings_findings = read_settings(root if layout else None)
    findings += settings_findings
    if root is not None and layout and upgraded is not None:
        findings += _test_dependency_findings(root, upgraded)
    if has_errors(findings) or upgraded is None:
        return None, findings
    config = to_config(upgraded, written)
    project = Project(config=config, build_toml=build_toml, root=root, platforms=settings.platforms,
                      hub_cache_trust=settings.hub_cache_trust)
    findings += place_findings(platform_findings(project, matrix), data, text, file)
    return project, findings


def upstream_last_word(found: list[Finding], text: str, file: str) -> list[Finding]:
    """Upstream's parser has the last word on a file publisher's rules pass."""
    if has_errors(found):
        return []
    try:
        verdict = upstream.parse(text.encode("utf-8"))
    except upstream.ParserUnavailable as err:
        return [upstream.unavailable_finding(str(err), file)]
    return [] if verdict.accepted else [upstream.refusal_finding(verdict.message, text, file)]


def _test_dependency_findings(root: Path, data: Mapping) -> list[Finding]:
    """PB410 (pyproject.toml's test group unreadable) and PB409 (tests import what nothing declares)."""
    from publisher.project.test_imports import check_test_imports
    from publisher.testing.test_depends import pyproject_test_depends

    general = data.get("general") if isinstance(data.get("general"), Mapping) else {}
    name = general.get("name")
    if not isinstance(name, str):
        return []
    depends = [d for d in general.get("python-depends") or [] if isinstance(d, str)]
    cuda = general.get("cuda") if isinstance(general.get("cuda"), Mapping) else {}
    depends += [d for d in cuda.get("python-depends") or [] if isinstance(d, str)]
    backends = [b for b in general.get("backends") or [] if isinstance(b, str)]
    _, problems = pyproject_test_depends(root)
    return problems + check_test_imports(root, name.replace("-", "_"), depends, backends)


def require_project(path: Path, matrix: Path | None = None) -> Project:
    """Load a project folder for a later stage; errors stop the command."""
    project, findings = load_project(path, matrix=matrix)
    if project is None or has_errors(findings):
        raise ProjectError(
            "the project has errors:\n" + render_human([f for f in findings if f.severity is Severity.ERROR]),
            f"run `publisher check {path}` for details",
        )
    return project
