"""Torch C++ APIs that torch removed (or deprecated and still ships), found in
a project's sources, and the mechanical port of those whose replacement is
exact. The table is data (resources/removed_torch_apis.yaml); `check` turns
each use into a finding, `adopt` and `migrate --sources` call `port_text`.

One rule decides whether a use blocks a build: `blocks(use, torch_versions)`
is true when every torch of the matrix is at or past the release that removed
it; a use some torch of the matrix still compiles is a warning."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from publisher.cxx import line_of, mask
from publisher.data import read_yaml
from publisher.project.versions import version_key

SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl", ".mm")


@dataclass(frozen=True)
class RemovedApi:
    id: str
    name: str
    pattern: re.Pattern
    replacement: str
    reference: str
    removed_in: str | None = None  # first torch release without it
    deprecated_in: str | None = None  # still shipped, deprecated since
    rewrite: str | None = None  # exact replacement (re.sub template)
    include: str | None = None  # header the replacement needs
    header_map: tuple[tuple[str, str], ...] = ()  # THC header -> successor
    example: str | None = None  # a small source using it (the test suite compiles it)

    @property
    def removed(self) -> bool:
        return self.removed_in is not None

    def compiled_by(self, torch_version: str) -> bool:
        """Whether torch `torch_version` still has it (deprecated ones: yes)."""
        return self.removed_in is None or version_key(torch_version) < version_key(self.removed_in)


@dataclass(frozen=True)
class ApiUse:
    api: RemovedApi
    file: str  # as the caller named it (relative to the project)
    line: int
    column: int
    text: str  # the matched source text

    def fix(self) -> str:
        return f"use {self.api.replacement}"


@dataclass(frozen=True)
class PortedFile:
    text: str  # the file after every exact rewrite
    ported: tuple[ApiUse, ...]  # uses the rewrite replaced (positions in the original)
    left: tuple[ApiUse, ...]  # uses still there, for hands (positions in the new text)


@cache
def apis() -> tuple[RemovedApi, ...]:
    rules = []
    for entry in read_yaml("removed_torch_apis.yaml")["rules"]:
        rules.append(RemovedApi(
            id=entry["id"],
            name=entry["name"],
            pattern=re.compile(entry["pattern"], re.MULTILINE),
            replacement=entry["replacement"],
            reference=entry["reference"],
            removed_in=entry.get("removed_in"),
            deprecated_in=entry.get("deprecated_in"),
            rewrite=entry.get("rewrite"),
            include=entry.get("include"),
            header_map=tuple((entry.get("header_map") or {}).items()),
            example=entry.get("example"),
        ))
    return tuple(rules)


def _covered(spans: list[tuple[int, int]], start: int) -> bool:
    return any(a <= start < b for a, b in spans)


def scan_text(text: str, file: str) -> list[ApiUse]:
    """Every use in one source, in order; comments and string literals never
    count (an #include's header name is read, its quotes are not a string)."""
    no_comments = mask(text, strings=False)
    masked = mask(text)
    uses: list[ApiUse] = []
    taken: list[tuple[int, int]] = []  # a general rule (THCState) yields to a precise one on the same text
    for api in apis():
        for m in api.pattern.finditer(no_comments):
            start = m.start()
            if masked[start] != no_comments[start] or _covered(taken, start):
                continue  # inside a string literal, or already reported
            line = line_of(text, start)
            column = start - (text.rfind("\n", 0, start) + 1) + 1
            uses.append(ApiUse(api, file, line, column, m.group(0).strip()))
            taken.append((m.start(), max(m.end(), m.start() + 1)))
    return sorted(uses, key=lambda u: (u.line, u.column))


def is_source(path: Path) -> bool:
    return path.suffix.lower() in SOURCE_SUFFIXES


def scan_files(root: Path, files: Iterable[Path]) -> list[ApiUse]:
    """Uses in each C/C++/CUDA source among `files` (paths under `root`);
    unreadable or non-UTF-8 files are skipped (the build reports those)."""
    uses: list[ApiUse] = []
    for path in files:
        if not is_source(path) or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        uses.extend(scan_text(text, rel))
    return uses


def blocks(api: RemovedApi, torch_versions: Iterable[str]) -> bool:
    """True when no torch of `torch_versions` compiles a source using `api`
    (an empty matrix blocks nothing: there is nothing to compile for)."""
    versions = list(torch_versions)
    return bool(versions) and api.removed and not any(api.compiled_by(v) for v in versions)


def _header_rewrite(api: RemovedApi, m: re.Match) -> str | None:
    successor = dict(api.header_map).get(m.group("header"))
    return f"#include <{successor}>" if successor else None


def port_text(text: str, file: str) -> PortedFile:
    """Apply every exact rewrite of the table to one source. A THCState
    declaration is deleted only when nothing else in the file still needs
    THCState; an include a replacement needs is added once, after the last
    #include (or at the top). What remains is rescanned and returned as `left`."""
    before = scan_text(text, file)
    ported: list[ApiUse] = []
    out = text
    needed: list[str] = []
    for api in apis():
        if api.rewrite is None and not api.header_map:
            continue
        if api.id == "thcstate-declaration":
            continue  # after the others: it depends on what is left
        mine = [u for u in before if u.api.id == api.id and (not api.header_map or _header_rewrite(api, api.pattern.search(u.text)))]
        if not mine:
            continue
        out, count = _substitute(api, out)
        if count:
            ported.extend(mine)
            if api.include and api.include not in needed:
                needed.append(api.include)
    declaration = next(a for a in apis() if a.id == "thcstate-declaration")
    leftover = [u for u in scan_text(out, file) if u.api.id in ("thcstate", "thc-other", "thcstate-stream")]
    if not leftover:
        decls = [u for u in before if u.api.id == declaration.id]
        if decls:
            out, _ = _substitute(declaration, out)
            ported.extend(decls)
    out = _add_includes(out, needed)
    return PortedFile(out, tuple(sorted(ported, key=lambda u: (u.line, u.column))), tuple(scan_text(out, file)))


def _substitute(api: RemovedApi, text: str) -> tuple[str, int]:
    """re.sub of one rule over `text`, only at matches outside comments and strings."""
    no_comments = mask(text, strings=False)
    masked = mask(text)
    pieces, last, count = [], 0, 0
    for m in api.pattern.finditer(no_comments):
        start = m.start()
        if masked[start] != no_comments[start]:
            continue
        if api.header_map:
            new = _header_rewrite(api, m)
            if new is None:
                continue
        else:
            new = m.expand(api.rewrite)
        if api.id == "thcstate-declaration":
            end = m.end() + (1 if text[m.end():m.end() + 1] == "\n" else 0)
            pieces.append(text[last:start])
            last = end
        else:
            pieces.append(text[last:start] + new)
            last = m.end()
        count += 1
    pieces.append(text[last:])
    return "".join(pieces), count


_INCLUDE_LINE = re.compile(r"^[ \t]*#[ \t]*include\b.*$", re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once\b.*$", re.MULTILINE)


def _add_includes(text: str, headers: list[str]) -> str:
    """`headers` not yet included, added after the file's last #include (or
    its `#pragma once`, or first)."""
    masked = mask(text, strings=False)
    missing = [h for h in headers if not re.search(r'#\s*include\s*[<"]' + re.escape(h) + r'[>"]', masked)]
    if not missing:
        return text
    lines = "".join(f"#include <{h}>\n" for h in missing)
    includes = list(_INCLUDE_LINE.finditer(masked)) or list(_PRAGMA_ONCE.finditer(masked))[:1]
    if not includes:
        return lines + text
    end = includes[-1].end()
    if text[end:end + 1] == "\n":
        return text[:end + 1] + lines + text[end + 1:]
    return text[:end] + "\n" + lines.rstrip("\n") + text[end:]
