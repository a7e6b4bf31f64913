"""Rewriting an author's files: every new text is written beside its file
first; only when all are written are they renamed over the originals, and a
rename that fails puts back the files already replaced. An error or an
interrupt leaves each file old or new, never half, and the set all old or all
new."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path


def replace_texts(texts: Mapping[Path, str]) -> None:
    """Replace each file with its new text (UTF-8, line endings as given), keeping its mode."""
    originals = {path: path.read_bytes() for path in texts}
    staged: list[tuple[str, Path]] = []
    replaced: list[Path] = []
    try:
        for path, text in texts.items():
            staged.append((_write_beside(path, text.encode("utf-8")), path))
        for tmp, path in staged:
            os.replace(tmp, path)
            replaced.append(path)
    except BaseException:
        for path in replaced:
            os.replace(_write_beside(path, originals[path]), path)
        raise
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)


def _write_beside(path: Path, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".publisher")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp
