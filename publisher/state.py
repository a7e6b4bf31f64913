"""Where the publisher keeps its records about a build: beside the variant
folders, never inside them (so a variant's digest stays valid).

<project>/build/<variant>/          the variant, exactly as get_kernel loads it
<project>/build/.publisher/         publisher's records (ignored by `kernels`:
    build-report.json               result of the last build of each variant
    test-report.json                result of the last test of each variant
    push-report.json                where each variant, as it is now, was last published from here
    bench/<device-key>.json         benchmark results on one device (publisher/bench/results.py), and its .svg plot
    logs/<variant>.log              full build log
    logs/<variant>.test.log         full test log
    staging/                        variants being built (moved into place when complete)
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

STATE_DIR = ".publisher"


def state_dir(build_dir: Path) -> Path:
    return Path(build_dir) / STATE_DIR


def logs_dir(build_dir: Path) -> Path:
    return state_dir(build_dir) / "logs"


def staging_dir(build_dir: Path) -> Path:
    return state_dir(build_dir) / "staging"


def build_report_path(build_dir: Path) -> Path:
    return state_dir(build_dir) / "build-report.json"


def test_report_path(build_dir: Path) -> Path:
    return state_dir(build_dir) / "test-report.json"


def push_report_path(build_dir: Path) -> Path:
    return state_dir(build_dir) / "push-report.json"


def variant_fingerprint(variant_dir: Path) -> str:
    """Identity of a built variant: sha256 of its metadata.json (which holds
    the digest of every other file). A report entry applies to a variant only
    while this matches."""
    return hashlib.sha256((Path(variant_dir) / "metadata.json").read_bytes()).hexdigest()


def read_report(path: Path) -> dict:
    """{"schema": 1, "variants": {name: {...}}}; empty when absent or unreadable."""
    try:
        data = json.loads(Path(path).read_text())
        if isinstance(data, dict) and isinstance(data.get("variants"), dict):
            return data
    except (OSError, ValueError):
        pass
    return {"schema": 1, "variants": {}}


def update_report(path: Path, entries: dict[str, dict]) -> None:
    """Merge per-variant entries into a report, atomically (write + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    report = read_report(path)
    report["variants"].update(entries)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".report-")
    with os.fdopen(fd, "w") as fh:
        json.dump(report, fh, indent=2, sort_keys=True)
    os.replace(tmp, path)
