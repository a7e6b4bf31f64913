"""The shared corpus of real build.toml files and its INDEX.md expectations
(column "current parser": OK, OK-auto-upgrade, MIGRATE, REJECT + reasons)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

# The corpus is not in this repository (real third-party files); CI points PUBLISHER_CORPUS at its copy
CORPUS = Path(os.environ.get("PUBLISHER_CORPUS") or Path(__file__).resolve().parents[2] / "shared" / "corpus")
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


def corpus_present() -> bool:
    return (CORPUS / "INDEX.md").is_file()


def require_corpus() -> None:
    """Fail, never skip: a run without the corpus must not pass as green."""
    if not corpus_present():
        pytest.fail(
            f"the shared corpus of real build.toml files is missing: no {CORPUS / 'INDEX.md'}. "
            "Set PUBLISHER_CORPUS to a folder holding INDEX.md, build-toml/ and layouts/ "
            "(default: ../shared/corpus beside the repository).",
            pytrace=False,
        )


def cases(items: list) -> list:
    """Parameters of a corpus-driven test; without the corpus one case that
    fails in require_corpus(), instead of pytest's silent empty-set skip."""
    return items if corpus_present() else [pytest.param(None, id="corpus-missing")]


def entries() -> list[Entry]:
    if not corpus_present():
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
