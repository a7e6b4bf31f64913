"""After the commit: does the branch hold exactly the files of this build, and
which environment of the matrix would `kernels.get_kernel` resolve to which
variant (decided by the real `kernels` resolver, with each cell's system
parameters spelled out), and which environments get none."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from publisher.plan.matrix import Cell
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
    from kernels.backends import parse_backend
    from kernels.variants import _resolve_variant_for_system, parse_variant
    from packaging.version import Version

    parsed = []
    for name in variant_names:
        try:
            parsed.append(parse_variant(name))
        except ValueError:
            continue
    out = []
    for cell in cells:
        cpu, _, os = cell.platform.partition("-")
        label = f"torch {cell.torch} {cell.compute} {cell.platform}"
        accepted, trace = _resolve_variant_for_system(
            variants=parsed,
            selected_backend=parse_backend(cell.compute),
            cpu=cpu,
            os=os,
            torch_version=Version(cell.torch),
            torch_cxx11_abi=True if os == "linux" else None,
            tvm_ffi_version=None,
            macos_version=Version("26.0") if os == "darwin" else None,
        )
        if accepted:
            out.append(Resolution(label, accepted[0].variant_str, "", cell.required))
        else:
            reason = trace[0].reason if trace else "no variants were pushed"
            out.append(Resolution(label, None, reason, cell.required))
    return out
