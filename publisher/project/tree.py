"""What in a project folder is never its own source: build outputs, environments, caches, version
control. Every walk of a project leaves these out alike (the inputs fingerprint, the folder sent
to remote jobs, the layout checks), so a job fingerprints the sources this machine fingerprints."""

from __future__ import annotations

from pathlib import Path

from publisher.state import STATE_DIR

# folders under these names, wherever they are
NOT_SOURCE_DIRS = frozenset({"build", "result", "venv", "__pycache__", "node_modules",
                             ".git", ".hg", ".venv", ".direnv", ".tox", ".nox",
                             ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# files and folders with these endings
NOT_SOURCE_ENDINGS = (".egg-info", ".pyc", ".pyo")


def not_source(path: Path) -> bool:
    """Whether `path`, a file or folder inside a project, is never part of its sources (a folder holding
    publisher's records is a build folder, whatever its name: `build --out`)."""
    if path.name.endswith(NOT_SOURCE_ENDINGS):
        return True
    return path.is_dir() and (path.name in NOT_SOURCE_DIRS or (path / STATE_DIR).is_dir())
