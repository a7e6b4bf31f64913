"""Rewriting an author's files: every new text is written beside its file
first, and only when all are written are they renamed over the originals, so
an error or an interrupt leaves each file either old or new, never half, and
a set of files is never left half rewritten by a failed write."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path


def replace_texts(texts: Mapping[Path, str]) -> None:
    """Replace each file with its new text (UTF-8, line endings as given), keeping its mode."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in texts.items():
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".publisher")
            staged.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
