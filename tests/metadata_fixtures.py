"""Every metadata.json publisher writes during a test run is one the kernels
client reads (imported by conftest.py): when the run ends, each variant
folder publisher built under the run's temporary folders
(`build/<variant>/metadata.json` whose provenance names publisher as its
builder: local, Docker, remote-job and act builds alike) is parsed with
`kernels._rust.Metadata`, upstream's own reader, and must carry
`kernels-minver`. Tests that write a metadata.json by hand (another builder's,
or a broken one on purpose) are not publisher's and are left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

__all__ = ["every_built_metadata_reads_with_kernels"]


def built_metadata(base: Path) -> list[Path]:
    found = []
    for path in sorted(base.rglob("build/*/metadata.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        provenance = data.get("provenance") if isinstance(data, dict) else None
        if isinstance(provenance, dict) and provenance.get("builder") == "publisher":
            found.append(path)
    return found


def unreadable(paths: list[Path]) -> list[str]:
    from kernels._rust import Metadata

    problems = []
    for path in paths:
        try:
            metadata = Metadata.read_from_file(path)
        except ValueError as err:
            problems.append(f"{path}: {err}")
            continue
        if metadata.kernels_minver is None:
            problems.append(f"{path}: no kernels-minver")
    return problems


@pytest.fixture(scope="session", autouse=True)
def every_built_metadata_reads_with_kernels(tmp_path_factory):
    yield
    paths = built_metadata(tmp_path_factory.getbasetemp())
    problems = unreadable(paths)
    assert not problems, f"{len(problems)} of the {len(paths)} metadata.json publisher wrote in this test run " \
                         "are not what kernels reads:\n" + "\n".join(problems)
