"""The run folder that travels to remote jobs (its layout: remote/request.py):
the project without its build outputs, the variants sent, this publisher as a
wheel, one request per job."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from publisher.project.tree import not_source
from publisher.remote.request import JobRequest
from publisher.remote.wheel import build_wheel


def _ignore(folder: str, names: list[str]) -> list[str]:
    """Never sent: what is not a source (project/tree.py). Other dot files travel: a build or a test may
    read them."""
    return [n for n in names if not_source(Path(folder) / n)]


def make_run_folder(dest: Path, project_root: Path, build_dir: Path, variants: Sequence[str],
                    requests: Mapping[str, JobRequest], matrix_file: Path | None = None) -> Path:
    dest = Path(dest)
    project = dest / "project"
    shutil.copytree(project_root, project, ignore=_ignore, symlinks=False)
    for name in variants:
        shutil.copytree(Path(build_dir) / name, project / "build" / name, symlinks=False)
    build_wheel(dest / "wheel")
    if matrix_file is not None:
        shutil.copyfile(matrix_file, dest / "matrix.yaml")
    for key, request in requests.items():
        request.write(dest / "requests" / f"{key}.json")
    return dest


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
