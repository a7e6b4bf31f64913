"""A wheel of the publisher that is running, for a remote job to install: the
job tests with exactly this code, whether it came from PyPI or from a checkout
with changes of one's own. Made from the installed package's files and its
distribution metadata (its dependencies are then installed by pip in the job)."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import zipfile
from pathlib import Path

import publisher

DIST = "kernel-publisher"
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = (".pyc", ".pyo")


def _metadata() -> tuple[str, str, str]:
    """(version, METADATA text, entry_points.txt text)."""
    try:
        dist = importlib.metadata.distribution(DIST)
    except importlib.metadata.PackageNotFoundError:
        return publisher.__version__, f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {publisher.__version__}\n", \
            "[console_scripts]\npublisher = publisher.cli:main\n"
    # The installed METADATA file as it is: re-serializing the parsed message puts the long description
    # into a header, which email refuses once a README line reads like one ("`name`: ...").
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if not text:
        meta = dist.metadata
        text = meta.as_string() if hasattr(meta, "as_string") else str(meta)
    return dist.version, text, dist.read_text("entry_points.txt") or "[console_scripts]\npublisher = publisher.cli:main\n"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(dest_dir: Path) -> Path:
    """Write the wheel into dest_dir; returns its path."""
    version, metadata, entry_points = _metadata()
    package = Path(publisher.__file__).resolve().parent
    dist_info = f"kernel_publisher-{version}.dist-info"
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    path = dest_dir / f"kernel_publisher-{version}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as whl:
        def add(name: str, data: bytes) -> None:
            whl.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
            records.append(_record_line(name, data))

        for file in sorted(package.rglob("*")):
            rel = file.relative_to(package)
            if file.is_dir() or _SKIP_DIRS & set(rel.parts) or file.suffix in _SKIP_SUFFIXES:
                continue
            add(f"publisher/{rel.as_posix()}", file.read_bytes())
        add(f"{dist_info}/METADATA", metadata.encode())
        add(f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: publisher\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        add(f"{dist_info}/entry_points.txt", entry_points.encode())
        add(f"{dist_info}/top_level.txt", b"publisher\n")
        whl.writestr(f"{dist_info}/RECORD", "\n".join(records + [f"{dist_info}/RECORD,,"]) + "\n")
    return path
