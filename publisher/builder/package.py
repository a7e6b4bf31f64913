"""Lay out a variant folder: the Python package flat, the generated _ops.py,
the compiled library, and metadata.json (UPSTREAM.md section 4)."""

from __future__ import annotations

import shutil
from pathlib import Path

from publisher import __version__
from publisher.builder.metadata import kernels_minver
from publisher.git import GitState
from publisher.plan.planner import PlannedVariant
from publisher.project.model import Project

_OPS_TEMPLATE = '''import torch
{import_line}
ops = torch.ops.{ops_id}


def add_op_namespace_prefix(op_name: str) -> str:
    """Prefix op by namespace."""
    return f"{ops_id}::{{op_name}}"
'''


def ops_id(project: Project, backend: str, unique: str) -> str:
    return f"_{project.python_name}_{backend}_{unique}"


_BYTECODE = (".pyc", ".pyo")


def copy_python_package(project: Project, stage: Path) -> None:
    """Copy torch-ext/<python_name>/ flat into the variant, never bytecode.
    Compiled kernels keep the `pyext` file extensions (and subpackages);
    Python-only kernels keep every file, as their package is the whole kernel
    (py.typed, JSON configs and other package data)."""
    package = project.package_dir
    if not package.is_dir():
        raise FileNotFoundError(f"{package}: the Python package is missing (it must hold __init__.py)")
    exts = {"." + e.lstrip(".") for e in project.config.framework.pyext}
    keep_all = project.config.is_noarch
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if "__pycache__" in rel.parts or not path.is_file() or path.suffix in _BYTECODE:
            continue
        if not keep_all and path.suffix not in exts:
            continue
        dest = stage / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)


def write_ops_py(stage: Path, ops: str, compiled: bool) -> None:
    import_line = f"from . import {ops}\n" if compiled else ""
    (stage / "_ops.py").write_text(_OPS_TEMPLATE.format(ops_id=ops, import_line=import_line))


def metadata_fields(
    project: Project,
    planned: PlannedVariant,
    ops: str,
    archs: tuple[str, ...],
    git: GitState | None,
    toolchain: dict[str, str],
) -> dict:
    general = project.config.general
    backend = planned.backend
    extras = general.backend_extras.get(backend)
    python_depends = list(dict.fromkeys([*general.python_depends, *(extras.python_depends if extras else ())]))
    kernel_depends = [*general.kernel_depends, *(extras.kernel_depends if extras else ())]
    provenance: dict = {"kernel-builder": {"version": __version__}, "builder": "publisher"}
    if git:
        provenance["kernel"] = {"commit": git.commit, "dirty": git.dirty}
    if toolchain:
        provenance["toolchain"] = dict(toolchain)
    fields: dict = {
        "name": general.name,
        "id": ops,
        "version": general.version,
        "license": general.license,
        "python-depends": python_depends,
        "backend": {"type": backend, "archs": list(archs)},
        "provenance": provenance,
    }
    if kernel_depends:
        fields["kernel-depends"] = [
            {"repo-id": d.repo_id, **({"version": d.version} if d.version is not None else {"revision": d.revision})}
            for d in kernel_depends
        ]
    if general.upstream:
        fields["upstream"] = general.upstream
    if general.source:
        fields["source"] = general.source
    fields["kernels-minver"] = kernels_minver(fields)
    return fields
