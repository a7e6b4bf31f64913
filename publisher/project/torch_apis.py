"""`check`'s findings for torch C++ APIs torch removed, in the sources the
build compiles: the [torch] and built kernels' `src` files, and the project's
own headers they include (followed through every include); and for torch
Python modules torch removed (torch._six), in the kernel's Python package
(torch-ext/). Each use is an error (PB601) when no torch of the matrix has it,
a warning (PB602) when one still does; the table and the scanners are
project/removed_apis.py and project/removed_python.py."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from publisher.codes import finding
from publisher.cxx import mask
from publisher.findings import Finding
from publisher.project.removed_apis import ApiUse, blocks, is_source, scan_text
from publisher.project.removed_python import scan_python
from publisher.project.versions import version_key, within

MAX_FILES = 5000  # sources followed per project
MAX_BYTES = 4 * 1024 * 1024  # a larger file is generated data, not read
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.MULTILINE)


def _strs(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _tables(data: Mapping) -> list[Mapping]:
    """[torch] and each kernel general.backends builds."""
    general = data.get("general") if isinstance(data.get("general"), Mapping) else {}
    backends = set(_strs(general.get("backends")))
    kernels = data.get("kernel") if isinstance(data.get("kernel"), Mapping) else {}
    return [data["torch"]] + [k for k in kernels.values() if isinstance(k, Mapping) and k.get("backend") in backends]


def _read(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def compiled_sources(root: Path, data: Mapping) -> dict[Path, str]:
    """Every C/C++/CUDA file the build compiles or includes from the project: path -> text."""
    if not isinstance(data.get("torch"), Mapping):
        return {}  # torch-noarch compiles nothing; tvm-ffi sources do not use torch's C++ API
    real_root = root.resolve()
    tables = _tables(data)
    include_dirs = [root / d for t in tables for d in _strs(t.get("include"))]
    queue = [root / s for t in tables for s in _strs(t.get("src")) if is_source(Path(s))]
    found: dict[Path, str] = {}
    while queue and len(found) < MAX_FILES:
        path = queue.pop(0)
        try:
            real = path.resolve()
        except (OSError, RuntimeError, ValueError):  # a NUL or a loop: the layout check reports the path
            continue
        if real in found or not real.is_relative_to(real_root):
            continue
        text = _read(real)
        if text is None:
            continue
        found[real] = text
        for header in _INCLUDE.findall(mask(text, strings=False)):
            for folder in (real.parent, *include_dirs):
                candidate = folder / header.strip()
                if is_source(candidate) and _is_file(candidate):
                    queue.append(candidate)
                    break
    return found


def package_python(root: Path) -> dict[Path, str]:
    """Every Python file of the kernel's package (torch-ext/, what the build copies into each variant)."""
    real_root = root.resolve()
    found: dict[Path, str] = {}
    folder = real_root / "torch-ext"
    try:
        paths = sorted(folder.rglob("*.py")) if folder.is_dir() else []
    except OSError:
        return found
    for path in paths[:MAX_FILES]:
        try:
            real = path.resolve()
        except (OSError, RuntimeError, ValueError):
            continue
        text = _read(real) if real.is_relative_to(real_root) else None
        if text is not None:
            found[real] = text
    return found


def removed_api_findings(root: Path, data: Mapping, matrix_torches: Iterable[str]) -> list[Finding]:
    """PB601/PB602 for each use, at its file and line; judged against the
    torches of the matrix that [torch] minver/maxver admit."""
    torch = data.get("torch") if isinstance(data.get("torch"), Mapping) else {}
    versions = sorted({v for v in matrix_torches if within(v, torch.get("minver"), torch.get("maxver"))}, key=version_key)
    real_root = root.resolve()
    out = []
    for path, text in compiled_sources(root, data).items():
        for use in scan_text(text, path.relative_to(real_root).as_posix()):
            out.append(_finding(use, root / use.file, versions))
    for path, text in package_python(root).items():
        for use in scan_python(text, path.relative_to(real_root).as_posix()):
            out.append(_finding(use, root / use.file, versions))
    return out


def _finding(use: ApiUse, path: Path, versions: list[str]) -> Finding:
    api = use.api
    matrix = f"torch {', '.join(versions)}" if versions else "no torch (the matrix builds none for this project)"
    if blocks(api, versions):
        has = "has" if use.file.endswith(".py") else "compiles"
        message = f"{use.file} uses {api.name}, removed in torch {api.removed_in}: no torch of the matrix ({matrix}) {has} it"
        code = "PB601"
    elif api.removed:
        gone = [v for v in versions if not api.compiled_by(v)]
        message = (f"{use.file} uses {api.name}, removed in torch {api.removed_in}"
                   + (f": torch {', '.join(gone)} of the matrix "
                      f"{'does not have' if use.file.endswith('.py') else 'cannot compile'} it" if gone else ""))
        code = "PB602"
    else:
        message = f"{use.file} uses {api.name}, deprecated since torch {api.deprecated_in}"
        code = "PB602"
    hint = f"{use.fix()}" + (" (`publisher migrate --sources` rewrites it)" if api.rewrite is not None or _mapped(use) else "")
    return finding(code, message, file=str(path), line=use.line, hint=hint)


def _mapped(use: ApiUse) -> bool:
    """Whether the THC header this use includes has an exact successor."""
    m = use.api.pattern.search(use.text)
    return bool(use.api.header_map) and m is not None and m.group("header") in dict(use.api.header_map)
