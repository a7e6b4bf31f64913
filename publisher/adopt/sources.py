"""The project's files as adopt reads them: text with a size limit, relative
paths that stay inside the project, and the project headers a source includes."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from publisher.adopt import cpp

MAX_BYTES = 4 * 1024 * 1024  # a larger file is not a hand-written source (generated tables)
SKIP_DIRS = {".git", ".hg", ".svn", "build", "dist", ".venv", "venv", "env", "__pycache__", "node_modules", ".tox",
             ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache", "result", ".direnv", "site-packages"}
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp", ".tcc")


def read_text(path: Path) -> str | None:
    """The file's text, or None when it is missing, not a file, too large or unreadable."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def relative(root: Path, path: Path | str) -> str | None:
    """`path` relative to `root` (posix), or None when it lies outside (through `..` or a link)."""
    target = Path(path)
    if not target.is_absolute():
        target = root / target
    try:
        resolved = Path(os.path.normpath(target))
        rel = resolved.relative_to(Path(os.path.normpath(root)))
    except ValueError:
        return None
    try:
        if not (root / rel).resolve().is_relative_to(root.resolve()):
            return None
    except (OSError, RuntimeError):
        return None
    return rel.as_posix()


def walk(root: Path, suffixes: tuple[str, ...], limit: int = 20000) -> Iterator[str]:
    """Relative paths of files under root with one of the suffixes, build and VCS folders left out."""
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and not d.endswith(".egg-info"))
        for name in sorted(files):
            seen += 1
            if seen > limit:
                return
            if name.endswith(suffixes):
                yield (Path(folder) / name).relative_to(root).as_posix()


def includes(text: str) -> list[tuple[str, str, int]]:
    """(quote, header, line) for each #include outside comments."""
    masked = cpp.mask(text)
    found = []
    for m in _INCLUDE.finditer(masked):
        header = text[m.start(2):m.end(2)].strip()
        found.append((m.group(1), header, cpp.line_of(text, m.start())))
    return found


def project_headers(root: Path, start: Iterable[str], include_dirs: Iterable[str]) -> list[str]:
    """Project files reachable by #include from the files `start` (themselves left out), in order found:
    quoted includes relative to the including file, then any include through the include folders."""
    dirs = [d for d in include_dirs]
    order: list[str] = []
    seen = set(start)
    queue = list(start)
    while queue:
        rel = queue.pop(0)
        text = read_text(root / rel)
        if text is None:
            continue
        for quote, header, _ in includes(text):
            candidates = []
            if quote == '"':
                candidates.append(str(PurePosixPath(rel).parent / header))
            candidates += [str(PurePosixPath(d) / header) for d in dirs]
            for candidate in candidates:
                found = relative(root, candidate)
                if found and found not in seen and (root / found).is_file():
                    seen.add(found)
                    order.append(found)
                    queue.append(found)
                    break
    return order
