"""Header dependencies named in a kernel's `depends` (CUTLASS): fetched from
PyPI once per version into the user cache, shared by every toolchain."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from publisher import runner
from publisher.builder.backend import LineSink
from publisher.data import data_path, load_yaml
from publisher.errors import BuildFailed
from publisher.toolchains.provision import cache_root, locked, uv_path

SOURCES = data_path("depends_sources.yaml")


@lru_cache(maxsize=1)
def _sources() -> dict:
    return load_yaml(SOURCES.read_text())


def include_dirs(depends: tuple[str, ...], log: Path, on_line: LineSink) -> list[str]:
    """Include folders for every non-torch dependency, installing it on first use."""
    dirs: list[str] = []
    for name in depends:
        if name == "torch":
            continue
        source = _sources().get(name)
        if source is None:
            raise BuildFailed(f"dependency `{name}` is not available to the local backend (known: "
                              f"torch, {', '.join(sorted(_sources()))})")
        root = _ensure(name, source["requirement"], log, on_line)
        dirs += [str(root / d) for d in source["include"] if (root / d).is_dir()]
    return dirs


def _ensure(name: str, requirement: str, log: Path, on_line: LineSink) -> Path:
    target = cache_root().parent / "depends" / name
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.with_suffix(".lock")):
        if target.is_dir():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
        try:
            on_line(f"fetching {requirement} for `depends = [\"{name}\"]`")
            uv = uv_path()
            installer = [uv, "pip", "install", "--python", sys.executable] if uv else [sys.executable, "-m", "pip", "install"]
            result = runner.run([*installer, "--no-deps", "--target", str(tmp), requirement], log=log, on_line=on_line)
            if not result.ok:
                raise BuildFailed(f"could not fetch {requirement} for `{name}`: {result.first_error_line()}")
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target
