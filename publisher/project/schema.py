"""The shape of build.toml per edition: which tables and keys exist, which are
required, and their TOML types (upstream kernels-data structs, all of which
deny unknown fields). Values are judged in values.py; this module only walks
the structure and reports unknown keys (with a did-you-mean), missing keys and
wrong types."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from publisher.codes import finding
from publisher.findings import Finding
from publisher.project.model import KERNEL_BACKENDS


@dataclass(frozen=True)
class Key:
    kind: str  # str, int, strlist, table, tablelist, version-or-table
    required: bool = False
    table: Mapping[str, Key] | None = None


def _t(fields: dict[str, Key], required: bool = False) -> Key:
    return Key("table", required, fields)


STR, INT, LIST = Key("str"), Key("int"), Key("strlist")
KERNEL_DEPENDENCY = {"repo-id": Key("str", True), "version": INT, "revision": STR}
KDEPS = Key("tablelist", False, KERNEL_DEPENDENCY)
HUB = _t({"repo-id": STR, "branch": STR})


def _general(edition: int) -> dict[str, Key]:
    v5 = edition >= 5
    extra = {"kernel-depends": KDEPS} if v5 else {}
    fields = {
        "name": Key("str", True),
        "version": Key("int", True),
        "license": Key("str", True),
        "upstream": STR,
        "source": STR,
        "backends": Key("strlist", True),
        "cuda": _t({"minver": STR, "maxver": STR, "python-depends": LIST, **extra}),
        "hub": HUB,
        "neuron": _t({"python-depends": LIST, **extra}),
        "python-depends": LIST,
        "xpu": _t({"python-depends": LIST, **extra}),
    }
    if v5:
        fields.update({"edition": Key("int", True), "kernel-depends": KDEPS, "tpu": _t({"python-depends": LIST})})
    return fields


def _frameworks(edition: int) -> dict[str, Key]:
    stable = Key("version-or-table") if edition >= 5 else STR
    return {
        "torch": _t({"include": LIST, "minver": STR, "maxver": STR, "pyext": LIST, "src": LIST,
                     "stable-abi": stable, "cxx-flags": LIST}),
        # upstream declares no kebab-case renaming here: the keys really use underscores
        "torch-noarch": _t({"pyext": LIST, "cuda_capabilities": LIST, "rocm_archs": LIST}),
        "tvm-ffi": _t({"include": LIST, "pyext": LIST, "src": Key("strlist", True), "cxx-flags": LIST}),
    }


FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")
_KERNEL_COMMON = {"backend": Key("str", True), "depends": Key("strlist", True), "src": Key("strlist", True),
                  "include": LIST, "cxx-flags": LIST}
KERNEL_FIELDS: dict[str, dict[str, Key]] = {
    "cpu": _KERNEL_COMMON,
    "metal": _KERNEL_COMMON,
    "cuda": {**_KERNEL_COMMON, "cuda-capabilities": LIST, "cuda-flags": LIST, "cuda-minver": STR},
    "rocm": {**_KERNEL_COMMON, "rocm-archs": LIST, "hip-flags": LIST},
    "xpu": {**_KERNEL_COMMON, "sycl-flags": LIST},
}
_ANY_KERNEL_FIELD = {k for fields in KERNEL_FIELDS.values() for k in fields}

# keys people write that live elsewhere (older editions, typos of a known shape)
MOVED = {
    "general.repo-id": "`repo-id` belongs in [general.hub]",
    "general.branch": "`branch` belongs in [general.hub]",
    "general.cuda-minver": "use `minver` in [general.cuda]",
    "general.cuda-maxver": "use `maxver` in [general.cuda]",
    "general.universal": "Python-only kernels use a [torch-noarch] table; run `publisher migrate`",
    "torch.universal": "Python-only kernels use a [torch-noarch] table; run `publisher migrate`",
    "torch-noarch.cuda-capabilities": "in [torch-noarch] the key is spelled `cuda_capabilities`",
    "torch-noarch.rocm-archs": "in [torch-noarch] the key is spelled `rocm_archs`",
    "kernel.language": "kernels say `backend = \"cuda\"` (or rocm, metal...); run `publisher migrate`",
    "kernel.capabilities": "the key is `cuda-capabilities`",
}

_TYPE_NAMES = {"str": "a string", "int": "an integer", "strlist": "a list of strings", "table": "a table",
               "tablelist": "a list of tables", "version-or-table": "a version string or a table of backend = version"}


def type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a table"
    return f"a {type(value).__name__}"


def _type_ok(kind: str, value: object) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "strlist":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "table":
        return isinstance(value, Mapping)
    if kind == "tablelist":
        return isinstance(value, list) and all(isinstance(v, Mapping) for v in value)
    if kind == "version-or-table":
        return isinstance(value, str) or (isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()))
    return False


def suggest(key: str, allowed) -> str | None:
    match = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
    return match[0] if match else None


def _unknown(path: str, key: str, allowed, where: str, moved_key: str | None = None) -> Finding:
    moved = MOVED.get(moved_key or path)
    close = suggest(key, allowed)
    if moved:
        hint = moved
    elif close:
        hint = f"did you mean `{close}`?"
    else:
        hint = "remove it; allowed keys: " + ", ".join(sorted(allowed))
    message = f"unknown key `{key}` in {where}" + (f" (did you mean `{close}`?)" if close and not moved else "")
    return finding("PB104", message, field=path, hint=hint)


def check_table(data: Mapping, fields: Mapping[str, Key], prefix: str, where: str, out: list[Finding],
                moved_prefix: str | None = None) -> None:
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        spec = fields.get(key)
        if spec is None:
            out.append(_unknown(path, key, fields, where, f"{moved_prefix}.{key}" if moved_prefix else None))
            continue
        if not _type_ok(spec.kind, value):
            out.append(finding("PB106", f"`{path}` must be {_TYPE_NAMES[spec.kind]}, not {type_name(value)}",
                               field=path, hint=f"write `{key}` as {_TYPE_NAMES[spec.kind]}"))
            continue
        if spec.kind == "table" and spec.table is not None:
            check_table(value, spec.table, path, f"[{path}]", out)
        elif spec.kind == "tablelist" and spec.table is not None:
            for i, item in enumerate(value):
                check_table(item, spec.table, f"{path}[{i}]", f"`{path}` entry {i + 1}", out)
    for key, spec in fields.items():
        if spec.required and key not in data:
            path = f"{prefix}.{key}" if prefix else key
            out.append(finding("PB105", f"required key `{key}` missing in {where}", field=path or prefix,
                               hint=f"add `{key} = ...` to {where}"))


TOP_LEVEL = ("general", *FRAMEWORKS, "kernel")  # every edition's top-level tables


def fields(edition: int = 5, kernel_name: str = "k") -> Iterator[tuple[str, Key]]:
    """(dotted path, key) of every key a file of `edition` may hold; kernel keys
    under `kernel.<kernel_name>`, those of every kernel backend."""
    def walk(prefix: str, table: Mapping[str, Key]) -> Iterator[tuple[str, Key]]:
        for name, key in table.items():
            yield f"{prefix}{name}", key
            if key.kind == "table" and key.table:
                yield from walk(f"{prefix}{name}.", key.table)

    yield from walk("general.", _general(edition))
    for name, table in _frameworks(edition).items():
        yield from walk(f"{name}.", table.table or {})
    kernel = {k: v for backend in KERNEL_FIELDS.values() for k, v in backend.items()}
    yield from walk(f"kernel.{kernel_name}.", kernel)


def unknown_top_level(data: Mapping) -> list[Finding]:
    """A PB104 for each top-level key no edition has."""
    return [_unknown(key, key, TOP_LEVEL, "the top level") for key in data if key not in TOP_LEVEL]


def check_document(data: Mapping, edition: int) -> list[Finding]:
    """Structure of a whole file in edition `edition` (4 or 5)."""
    out: list[Finding] = []
    top = {"general": _t(_general(edition), True), **_frameworks(edition), "kernel": Key("table")}
    for key in data:
        if key not in top:
            out.append(_unknown(key, key, top, "the top level"))
    general = data.get("general")
    if general is None:
        out.append(finding("PB105", "required table [general] missing", field="general",
                           hint="add a [general] table with name, version, license, backends"))
    elif not isinstance(general, Mapping):
        out.append(finding("PB106", f"`general` must be a table, not {type_name(general)}", field="general", hint="write [general] as a table"))
    else:
        check_table(general, top["general"].table, "general", "[general]", out)
    present = [k for k in FRAMEWORKS if k in data]
    if len(present) != 1:
        found = ", ".join(f"[{k}]" for k in present) or "none"
        out.append(finding("PB107", f"exactly one framework table ([torch], [torch-noarch] or [tvm-ffi]) is required; found {found}",
                           field=present[1] if len(present) > 1 else (present[0] if present else "torch"),
                           hint="compiled kernels use [torch] (or [tvm-ffi]); Python-only kernels use [torch-noarch]"))
    for name in present:
        value = data[name]
        if not isinstance(value, Mapping):
            out.append(finding("PB106", f"`{name}` must be a table, not {type_name(value)}", field=name, hint=f"write [{name}] as a table"))
        else:
            check_table(value, top[name].table, name, f"[{name}]", out, moved_prefix=name)
    kernels = data.get("kernel")
    if kernels is not None:
        if not isinstance(kernels, Mapping):
            out.append(finding("PB106", f"`kernel` must be a table of kernels, not {type_name(kernels)}", field="kernel",
                               hint="write each kernel as [kernel.<name>]"))
        else:
            for name, kernel in kernels.items():
                _check_kernel(str(name), kernel, out)
    return out


def _check_kernel(name: str, kernel: object, out: list[Finding]) -> None:
    path = f"kernel.{name}"
    if not isinstance(kernel, Mapping):
        out.append(finding("PB106", f"`{path}` must be a table, not {type_name(kernel)}", field=path,
                           hint=f"write [kernel.{name}] with backend, src and depends"))
        return
    backend = kernel.get("backend")
    if backend is None:
        out.append(finding("PB105", f"kernel `{name}` has no `backend`", field=path,
                           hint=f"add `backend = ` one of {', '.join(KERNEL_BACKENDS)}"))
        fields = {k: v for k, v in _KERNEL_COMMON.items() if k != "backend"}
        check_table({k: v for k, v in kernel.items() if k in fields or k not in _ANY_KERNEL_FIELD}, fields, path, f"[{path}]", out, "kernel")
        return
    if not isinstance(backend, str) or backend not in KERNEL_FIELDS:
        close = suggest(backend, KERNEL_BACKENDS) if isinstance(backend, str) else None
        out.append(finding("PB204", f"kernel `{name}`: backend {backend!r} is not one of {', '.join(KERNEL_BACKENDS)}",
                           field=f"{path}.backend", hint=f"did you mean `{close}`?" if close else f"use one of {', '.join(KERNEL_BACKENDS)}"))
        return
    fields = KERNEL_FIELDS[backend]
    for key in kernel:
        if key not in fields and key in _ANY_KERNEL_FIELD:
            owners = [b for b, f in KERNEL_FIELDS.items() if key in f]
            out.append(finding("PB104", f"`{key}` is not a field of a {backend} kernel (only {'/'.join(owners)} kernels have it)",
                               field=f"{path}.{key}", hint=f"remove `{key}` or change `backend`"))
    check_table({k: v for k, v in kernel.items() if k in fields or k not in _ANY_KERNEL_FIELD}, fields, path, f"[{path}]", out, "kernel")
