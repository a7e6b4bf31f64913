"""build.toml for an adopted project: written whole from the extension
(setup.py and load() routes), or the author's own file edited (build.toml
route: upgraded to edition 5, renamed, the ported binding listed)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import tomlkit
from tomlkit.exceptions import TOMLKitError

from publisher.adopt.model import MARKER
from publisher.errors import ProjectError


@dataclass(frozen=True)
class KernelTable:
    name: str
    backend: str
    src: tuple[str, ...]
    include: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    cuda_flags: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildToml:
    route: str  # what the file was written from: setup.py, load()
    origin: str  # one line: "the CUDAExtension `simple_knn._C` of setup.py"
    name: str
    version: int
    license: str
    backends: tuple[str, ...]
    torch_src: tuple[str, ...]
    kernels: tuple[KernelTable, ...] = field(default=())
    repo_id: str | None = None


def header(route: str) -> str:
    return f"# Written by {MARKER} (from {route})"


def render(spec: BuildToml) -> str:
    doc = tomlkit.document()
    doc.add(tomlkit.comment(header(spec.route).removeprefix("# ")))
    doc.add(tomlkit.comment(f"for {spec.origin}. Rerun `publisher adopt` after changing it."))
    general = tomlkit.table()
    general["name"] = spec.name
    general["version"] = spec.version
    general["edition"] = 5
    general["license"] = spec.license
    general["backends"] = _array(spec.backends, multiline=False)
    if spec.repo_id:
        hub = tomlkit.table()
        hub["repo-id"] = spec.repo_id
        general["hub"] = hub
    doc["general"] = general
    torch = tomlkit.table()
    torch["src"] = _array(spec.torch_src)
    doc["torch"] = torch
    kernels = tomlkit.table(is_super_table=True)
    for kernel in spec.kernels:
        table = tomlkit.table()
        table["backend"] = kernel.backend
        table["depends"] = _array(["torch"], multiline=False)
        table["src"] = _array(kernel.src)
        if kernel.include:
            table["include"] = _array(kernel.include)
        if kernel.cxx_flags:
            table["cxx-flags"] = _array(kernel.cxx_flags)
        if kernel.cuda_flags:
            table["cuda-flags"] = _array(kernel.cuda_flags)
        if kernel.capabilities:
            table["cuda-capabilities"] = _array(kernel.capabilities, multiline=False)
        kernels[kernel.name] = table
    if spec.kernels:
        doc["kernel"] = kernels
    return tomlkit.dumps(doc)


def _array(values: Sequence[str], multiline: bool = True):
    array = tomlkit.array()
    array.extend(values)
    if multiline and len(values) > 1:
        array.multiline(True)
    return array


def edit_layout(text: str, *, name: str, torch_src: Sequence[str], repo_id: str | None) -> str:
    """The author's edition-5 build.toml (already migrated) with the kernel's name, the ported binding
    in [torch] src and the adopt header; comments and order kept."""
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as err:
        raise ProjectError(f"build.toml cannot be edited: {err}", "fix the TOML syntax first") from None
    doc["general"]["name"] = name
    src = doc["torch"].get("src")
    wanted = list(torch_src)
    if src is None or list(src) != wanted:
        doc["torch"]["src"] = _array(wanted)
    if repo_id:
        general = doc["general"]
        if "hub" not in general:
            general["hub"] = tomlkit.table()
        general["hub"]["repo-id"] = repo_id
    out = tomlkit.dumps(doc)
    marker = header("build.toml")
    if marker not in out:
        out = f"{marker}: the pybind11 binding ported to torch ops. Rerun `publisher adopt` after changing it.\n" + out
    return out


_NAME = re.compile(r"[a-z][-a-z0-9]*[a-z0-9]")


def kernel_name(text: str) -> str | None:
    """A valid kernel name from a package or project name: `qwen3_kernels` -> `qwen3-kernels`."""
    name = re.sub(r"[^a-z0-9]+", "-", text.strip().lower()).strip("-")
    name = re.sub(r"^[^a-z]+", "", name)
    return name if _NAME.fullmatch(name) else None


def is_valid_name(text: str) -> bool:
    return bool(_NAME.fullmatch(text))
