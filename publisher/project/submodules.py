"""Git submodules the build uses that are not checked out. A plain `git clone`
(and GitHub's actions/checkout, by default) leaves each submodule an empty
folder: the build would compile against, or package, nothing from it, and the
kernel would fail only where it runs (kernels-community/deep-gemm packages
CUTLASS's headers from one, for its run-time compiler)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from publisher.codes import finding
from publisher.findings import Finding

_PATH = re.compile(r"^\s*path\s*=\s*(.+?)\s*$", re.M)
MAX_GITMODULES = 1 << 20  # bytes


def check_submodules(root: Path, data: Mapping, ext_dir: str) -> list[Finding]:
    """PB408 for each submodule under `root` that is empty and that the build uses: inside the
    Python package folder (`ext_dir`), or holding (or held by) a path build.toml lists."""
    top = _work_tree(root)
    if top is None:
        return []
    gitmodules = top / ".gitmodules"
    try:
        if not gitmodules.is_file() or gitmodules.stat().st_size > MAX_GITMODULES:
            return []
        text = gitmodules.read_text(encoding="utf-8", errors="replace")
        real_root = root.resolve()
    except OSError:
        return []
    listed = _listed(data)
    out: list[Finding] = []
    for raw in _PATH.findall(text):
        try:
            path = (top / raw.strip().strip('"')).resolve()
            rel = PurePosixPath(path.relative_to(real_root).as_posix())
        except (ValueError, OSError, RuntimeError):
            continue  # another project's submodule, or no path a submodule could have
        if not _used(rel, ext_dir, listed) or not _empty(path):
            continue
        out.append(finding(
            "PB408", f"git submodule `{rel}` is not checked out (an empty folder), and the build uses it: it would "
                     "compile against, or package, nothing from it", file=str(path),
            hint="run `git submodule update --init --recursive` (in GitHub Actions: actions/checkout with "
                 "`submodules: recursive`)"))
    return out


def _work_tree(root: Path) -> Path | None:
    for folder in (root.resolve(), *root.resolve().parents):
        if (folder / ".git").exists():
            return folder
    return None


def _listed(data: Mapping) -> list[PurePosixPath]:
    tables = [data.get(k) for k in ("torch", "tvm-ffi")]
    kernels = data.get("kernel")
    tables += list(kernels.values()) if isinstance(kernels, Mapping) else []
    return [PurePosixPath(p) for t in tables if isinstance(t, Mapping) for key in ("src", "include")
            for p in (t.get(key) if isinstance(t.get(key), list) else []) if isinstance(p, str) and p.strip()]


def _used(sub: PurePosixPath, ext_dir: str, listed: list[PurePosixPath]) -> bool:
    def within(inner: PurePosixPath, outer: PurePosixPath) -> bool:
        return inner == outer or outer in inner.parents
    return within(sub, PurePosixPath(ext_dir)) or any(within(p, sub) or within(sub, p) for p in listed)


def _empty(path: Path) -> bool:
    try:
        return not path.exists() or path.is_dir() and next(path.iterdir(), None) is None
    except OSError:
        return False
