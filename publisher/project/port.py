"""`publisher migrate --sources`: the exact rewrites of removed torch C++ APIs
(project/removed_apis.py's `port_text`) over the sources the build compiles,
and of removed torch Python modules (project/removed_python.py's
`port_python`) over the kernel's Python package, planned first (a diff and
what is left for hands), written all at once."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from publisher.project.removed_apis import ApiUse, port_text
from publisher.project.removed_python import port_python
from publisher.project.torch_apis import compiled_sources, package_python


@dataclass(frozen=True)
class PortedSource:
    path: Path
    name: str  # relative to the project, as messages show it
    before: str
    after: str
    ported: tuple[ApiUse, ...]
    left: tuple[ApiUse, ...]


@dataclass(frozen=True)
class SourcePort:
    files: tuple[PortedSource, ...]

    @property
    def changed(self) -> tuple[PortedSource, ...]:
        return tuple(f for f in self.files if f.after != f.before)

    @property
    def ported(self) -> tuple[ApiUse, ...]:
        return tuple(u for f in self.files for u in f.ported)

    @property
    def left(self) -> tuple[ApiUse, ...]:
        return tuple(u for f in self.files for u in f.left)

    def texts(self) -> dict[Path, str]:
        return {f.path: f.after for f in self.changed}

    def diff(self) -> str:
        return "".join("".join(difflib.unified_diff(
            f.before.splitlines(keepends=True), f.after.splitlines(keepends=True),
            fromfile=f"{f.name} (before)", tofile=f"{f.name} (ported)")) for f in self.changed)


def plan_port(root: Path, data: Mapping) -> SourcePort:
    """The port of every source the build of `data` (an edition-5 build.toml) compiles under `root`."""
    real_root = root.resolve()
    files = []
    for port, found in ((port_text, compiled_sources(root, data)), (port_python, package_python(root))):
        for path, text in found.items():
            name = path.relative_to(real_root).as_posix()
            result = port(text, name)
            files.append(PortedSource(path, name, text, result.text, result.ported, result.left))
    return SourcePort(tuple(files))
