"""Rewrite a legacy build.toml (v1-v4) into edition 5, in place, and repair
(any edition) the values upstream's parser refuses whose meaning is plain.

Works on any mutable mapping: plain dicts (check upgrades in memory) and
tomlkit documents (migrate, which must keep comments and key order), so both
commands apply the same rules. `new_table` makes an empty table of the right
kind."""

from __future__ import annotations

import copy
from collections.abc import Callable, MutableMapping
from typing import Any

from publisher.errors import MigrationRefused
from publisher.project import resources
from publisher.project.editions import PRE_V1, UNSUPPORTED, V1_V2, V3, V4, V5, Edition
from publisher.project.model import BACKENDS, V1_UNIVERSAL_BACKENDS
from publisher.project.values import NAME
from publisher.project.versions import two_part_repair

_LANGUAGE_BACKEND = {"cuda": "cuda", "cuda-hipify": "cuda", "metal": "metal"}


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else copy.deepcopy(value)


def upgrade(doc: MutableMapping, edition: Edition, *, license: str | None = None, version: int | None = None,
            new_table: Callable[[], MutableMapping] = dict) -> list[str]:
    """Apply every step from the file's era to edition 5; return what changed."""
    if edition.era == V5:
        return []
    if edition.era == UNSUPPORTED:
        raise MigrationRefused(f"unsupported build edition {edition.edition!r}", "only editions 1-5 exist; set `edition = 5` by hand")
    if edition.era == PRE_V1:
        fields = ", ".join(m.field for m in edition.markers if "pre-v1" in m.reason)
        raise MigrationRefused(
            f"this is the 2024 pre-v1 format ({fields}); it cannot be converted faithfully",
            "rewrite it by hand as edition 5: [general] name, version, license, backends, edition = 5; [torch] src; "
            "one [kernel.<name>] per kernel with backend, depends and src (`publisher check` says what is missing)")
    general = doc.get("general")
    if not isinstance(general, MutableMapping):
        raise MigrationRefused("no [general] table", "add [general] with name, version, license and backends")
    changes: list[str] = []
    if edition.era == V1_V2:
        changes += _from_v1_v2(doc, general, new_table)
    if edition.era in (V1_V2, V3):
        changes += _from_v3(doc, general, license, version, new_table)
    if edition.era in (V1_V2, V3, V4):
        general["edition"] = 5
        changes.append("set general.edition = 5")
    return changes


def _from_v1_v2(doc: MutableMapping, general: MutableMapping, new_table) -> list[str]:
    changes: list[str] = []
    torch = doc.get("torch") if isinstance(doc.get("torch"), MutableMapping) else None
    universal = bool(general.pop("universal", False))
    if torch is not None and "universal" in torch:
        universal = bool(torch.pop("universal")) or universal
    if universal:
        noarch = new_table()
        if torch is not None and "pyext" in torch:
            noarch["pyext"] = _plain(torch["pyext"])
        if "torch" in doc:
            del doc["torch"]
        doc["torch-noarch"] = noarch
        changes.append("Python-only (`universal`) kernel: [torch] -> [torch-noarch]")
    cuda_bounds = {key[5:]: general.pop(key) for key in ("cuda-minver", "cuda-maxver") if key in general}
    if cuda_bounds:
        if not isinstance(general.get("cuda"), MutableMapping):
            general["cuda"] = new_table()
        for key, value in cuda_bounds.items():
            general["cuda"][key] = value
        changes.append("general.cuda-minver/maxver -> [general.cuda] minver/maxver")
    changes += _backend_python_depends(general, new_table)
    kernels = doc.get("kernel") if isinstance(doc.get("kernel"), MutableMapping) else {}
    for name in list(kernels):
        changes += _kernel_backend(kernels, name, new_table)
    if "backends" not in general:
        if universal:
            derived = sorted(V1_UNIVERSAL_BACKENDS)
        else:
            found = {k.get("backend") for k in kernels.values()
                     if isinstance(k, MutableMapping) and isinstance(k.get("backend"), str)}
            derived = sorted(b for b in BACKENDS if b in found)  # upstream writes them sorted
        if not derived:
            raise MigrationRefused("cannot derive general.backends: the file has no kernels and is not `universal`",
                                   "add `backends = [...]` to [general] by hand, then run migrate again")
        general["backends"] = derived
        changes.append(f"general.backends = {derived} (derived from the kernels)")
    return changes


def _backend_python_depends(general: MutableMapping, new_table) -> list[str]:
    """v2 listed backend-only packages (nvidia-cutlass-dsl) in general.python-depends."""
    names = general.get("python-depends")
    if not isinstance(names, list):
        return []
    changes = []
    for name in [n for n in names if isinstance(n, str) and n not in resources.general_python_depends()]:
        owners = [b for b in sorted(BACKENDS) if name in resources.backend_python_depends(b)]
        if len(owners) != 1:
            continue
        backend = owners[0]
        if not isinstance(general.get(backend), MutableMapping):
            general[backend] = new_table()
        if not isinstance(general[backend].get("python-depends"), list):
            general[backend]["python-depends"] = []
        general[backend]["python-depends"].append(name)
        names.remove(name)
        changes.append(f"general.python-depends: `{name}` -> [general.{backend}] python-depends")
    if not names:
        del general["python-depends"]
    return changes


def _kernel_backend(kernels: MutableMapping, name: str, new_table) -> list[str]:
    kernel = kernels[name]
    if not isinstance(kernel, MutableMapping) or "backend" in kernel and "language" not in kernel:
        return []
    language = kernel.pop("language", "cuda")
    if language not in _LANGUAGE_BACKEND:
        raise MigrationRefused(f"kernel.{name}: unknown language {language!r}",
                               "set `backend` by hand (cpu, cuda, metal, rocm or xpu)")
    backend = _LANGUAGE_BACKEND[language]
    kernel["backend"] = backend
    changes = [f"kernel.{name}: language {language!r} -> backend {backend!r}"]
    rocm_archs = kernel.pop("rocm-archs", None)
    if rocm_archs is not None and language != "cuda-hipify":
        changes.append(f"kernel.{name}: dropped rocm-archs (it had no effect on a {language} kernel)")
    if backend != "cuda" and "cuda-capabilities" in kernel:
        del kernel["cuda-capabilities"]
    if language == "cuda-hipify":
        rocm_name = f"{name}_rocm"
        if rocm_name in kernels:
            raise MigrationRefused(f"kernel.{name} is cuda-hipify but kernel.{rocm_name} already exists",
                                   f"rename kernel.{rocm_name}, then run migrate again")
        rocm = new_table()
        rocm["backend"] = "rocm"
        for key in ("depends", "include", "src"):
            if key in kernel:
                rocm[key] = _plain(kernel[key])
        if rocm_archs is not None:
            rocm["rocm-archs"] = rocm_archs
        kernels[rocm_name] = rocm
        changes.append(f"kernel.{name}: cuda-hipify -> added kernel.{rocm_name} (backend rocm, same sources)")
    return changes


def _from_v3(doc: MutableMapping, general: MutableMapping, license: str | None, version: int | None, new_table) -> list[str]:
    changes: list[str] = []
    missing = [k for k, given in (("license", license), ("version", version)) if k not in general and given is None]
    if missing:
        options = " ".join(f"--{k} {'apache-2.0' if k == 'license' else 1}" for k in missing)
        raise MigrationRefused(
            f"edition 5 requires general.{' and general.'.join(missing)}, which this file does not have",
            f"pass them, e.g. `publisher migrate {options} PATH` (version is the Hub branch v<version>)")
    if "version" not in general:
        general["version"] = version
        changes.append(f"general.version = {version}")
    if "license" not in general:
        general["license"] = license
        changes.append(f"general.license = {license!r}")
    if not any(k in doc for k in ("torch", "torch-noarch", "tvm-ffi")):
        doc["torch-noarch"] = new_table()
        changes.append("no framework table (v3 Python-only kernel) -> [torch-noarch]")
    return changes


def repair(doc: MutableMapping, new_table: Callable[[], MutableMapping] = dict) -> list[str]:
    """Rewrite, in a file of any edition, the values upstream's parser refuses
    where what the author meant is not in doubt; return what changed. Anything
    else upstream refuses is left for hands (`check` says what and why)."""
    changes: list[str] = []
    general = doc.get("general")
    if isinstance(general, MutableMapping):
        changes += _repair_name(general)
        changes += _repair_hub_keys(general, new_table)
        if isinstance(general.get("cuda"), MutableMapping):
            changes += _repair_bounds(general["cuda"], "general.cuda", ("minver", "maxver"))
    torch = doc.get("torch")
    if isinstance(torch, MutableMapping):
        changes += _repair_bounds(torch, "torch", ("minver", "maxver", "stable-abi"))
        if isinstance(torch.get("stable-abi"), MutableMapping):
            changes += _repair_bounds(torch["stable-abi"], "torch.stable-abi", tuple(torch["stable-abi"]))
    kernels = doc.get("kernel")
    for name, kernel in (kernels.items() if isinstance(kernels, MutableMapping) else ()):
        if isinstance(kernel, MutableMapping):
            changes += _repair_bounds(kernel, f"kernel.{name}", ("cuda-minver",))
            changes += _repair_depends(kernel, f"kernel.{name}")
    return changes


def _repair_bounds(table: MutableMapping, path: str, keys: tuple[str, ...]) -> list[str]:
    """"13" -> "13.0", "2.13.0" -> "2.13": the reading before kernels 0.17 (trailing zeros did not count)."""
    changes = []
    for key in keys:
        value = table.get(key)
        fixed = two_part_repair(value) if isinstance(value, str) else None
        if fixed is not None:
            table[key] = fixed
            changes.append(f'{path}.{key} "{value}" -> "{fixed}" (upstream reads exactly MAJOR.MINOR)')
    return changes


def _repair_name(general: MutableMapping) -> list[str]:
    """`flash_attn` -> `flash-attn`: the Python package (dashes as underscores) stays `flash_attn`."""
    name = general.get("name")
    if not isinstance(name, str) or NAME.fullmatch(name) or "_" not in name:
        return []
    fixed = name.replace("_", "-")
    if not NAME.fullmatch(fixed):
        return []
    general["name"] = fixed
    return [f"general.name `{name}` -> `{fixed}` (names use dashes; the Python package stays `{name}`)"]


def _repair_hub_keys(general: MutableMapping, new_table) -> list[str]:
    """`repo-id` / `branch` written in [general]: they only exist in [general.hub]."""
    changes = []
    for key in ("repo-id", "branch"):
        if key not in general:
            continue
        hub = general.get("hub")
        if hub is not None and (not isinstance(hub, MutableMapping) or key in hub):
            continue  # two values, or no table to move it to: for hands
        if hub is None:
            general["hub"] = hub = new_table()
        hub[key] = _plain(general.pop(key))
        changes.append(f"general.{key} -> [general.hub] {key}")
    return changes


def _repair_depends(kernel: MutableMapping, path: str) -> list[str]:
    depends = kernel.get("depends")
    renamed = resources.renamed_build_depends()
    changes = []
    for i, dep in enumerate(list(depends) if isinstance(depends, list) else []):
        if isinstance(dep, str) and dep in renamed:
            depends[i] = renamed[dep]
            changes.append(f"{path}.depends: `{dep}` -> `{renamed[dep]}` (renamed upstream)")
    return changes
