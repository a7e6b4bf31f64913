"""The shared corpus of real build.toml files and its INDEX.md expectations
(column "current parser": OK, OK-auto-upgrade, MIGRATE, REJECT + reasons)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
BUILD_TOMLS = CORPUS / "build-toml"
LAYOUTS = CORPUS / "layouts"


@dataclass(frozen=True)
class Entry:
    file: str
    path: str  # path in its source repository
    format: str
    verdict: str  # OK, OK-auto-upgrade, MIGRATE, REJECT
    notes: str

    @property
    def toml(self) -> Path:
        return BUILD_TOMLS / self.file

    def reject_clauses(self) -> list[str]:
        if "REJECT:" not in self.notes:
            return []
        text = self.notes.split("REJECT:", 1)[1]
        return [c.strip() for c in re.split(r";\s*|\bv[34]:\s*", text) if c.strip()]


def require_corpus() -> None:
    if not (CORPUS / "INDEX.md").is_file():
        pytest.skip(f"shared corpus not found at {CORPUS} (expected ../shared/corpus next to the repository)")


def entries() -> list[Entry]:
    if not (CORPUS / "INDEX.md").is_file():
        return []
    rows = []
    for line in (CORPUS / "INDEX.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) < 16 or not cells[0].isdigit():
            continue
        file = re.search(r"\[([^\]]+)\]", cells[1])[1]
        rows.append(Entry(file=file, path=cells[3].strip("`"), format=cells[7], verdict=cells[8], notes=cells[15]))
    return rows


def by_verdict(*verdicts: str) -> list[Entry]:
    return [e for e in entries() if e.verdict in verdicts]
