"""Problems are values: a Finding has a stable code, a severity, a location,
a message and a fix hint. Stages return lists of findings; the CLI renders them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    code: str  # stable, searchable: "PB101"
    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    hint: str | None = None
    field: str | None = None  # dotted path in build.toml, e.g. "kernel.relu.cuda-capabilities"

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def location(self) -> str:
        loc = self.file or "<input>"
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        return loc

    def to_json(self) -> dict:
        data = asdict(self)
        data["severity"] = self.severity.value
        return data


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(f.is_error for f in findings)


def render_line(f: Finding) -> str:
    """One finding where a command lists a few in its own words (push, release)."""
    return f"{f.code} {f.message}" + (f"\n    fix: {f.hint}" if f.hint else "")


def render_human(findings: list[Finding]) -> str:
    """Group by file, errors first within a file, in line order."""
    if not findings:
        return ""
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.file or "<input>", []).append(f)
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    lines: list[str] = []
    for file, items in by_file.items():
        lines.append(file)
        for f in sorted(items, key=lambda f: (f.line or 0, order[f.severity], f.code)):
            where = f"{f.line}" if f.line is not None else "-"
            lines.append(f"  {where:>4}  {f.severity.value:<7} {f.code}  {f.message}")
            if f.hint:
                lines.append(f"{'':>8}  fix: {f.hint}")
        lines.append("")
    errors = sum(1 for f in findings if f.severity is Severity.ERROR)
    warnings = sum(1 for f in findings if f.severity is Severity.WARNING)
    lines.append(f"{errors} error(s), {warnings} warning(s)")
    return "\n".join(lines)


def render_json(findings: list[Finding], **extra) -> str:
    return json.dumps({"findings": [f.to_json() for f in findings], **extra}, indent=2)


def relpath(path: Path, root: Path | None) -> str:
    if root is None:
        return str(path)
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
