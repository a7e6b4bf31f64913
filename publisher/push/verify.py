"""After the commit: does the branch hold exactly the files of this build, and
which environment of the matrix would `kernels.get_kernel` resolve to which
variant (decided by the real `kernels` resolver, with each cell's system
parameters spelled out), and which environments get none."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from publisher.plan.matrix import Cell
from publisher.plan.resolver import System, resolve
from publisher.push.changes import LocalFile
from publisher.push.hub_client import RemoteFile


@dataclass(frozen=True)
class Resolution:
    environment: str  # "torch 2.15 cu130 x86_64-linux"
    variant: str | None
    reason: str  # why nothing matched (the closest rejection), or "" when a variant matched
    required: bool = False  # the matrix cell is required (upstream policy)


def compare(expected: Mapping[str, LocalFile], deleted: Iterable[str], remote: Mapping[str, RemoteFile]) -> list[str]:
    """Problems: files missing or different on the branch, deleted files still there."""
    problems = []
    for path, local in sorted(expected.items()):
        found = remote.get(path)
        if found is None:
            problems.append(f"{path}: missing on the branch")
        elif not local.matches(found):
            problems.append(f"{path}: differs on the branch (remote {found.lfs_sha256 or found.blob_id}, "
                            f"local sha256 {local.sha256})")
    problems += [f"{path}: still on the branch although deleted" for path in sorted(deleted) if path in remote]
    return problems


def resolve_cells(variant_names: Iterable[str], cells: Iterable[Cell]) -> list[Resolution]:
    """Ask the `kernels` resolver, per matrix cell, which of these variants it loads."""
    names = list(variant_names)
    out = []
    for cell in cells:
        system = System(cell.torch, cell.compute, cell.platform)
        found = resolve(names, system)
        variant = found.accepted[0] if found.accepted else None
        out.append(Resolution(system.label, variant, found.reason if names else "no variants were pushed", cell.required))
    return out
