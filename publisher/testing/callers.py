"""Inputs for the smoke test from the kernel itself, before any guess: each
op's arguments as the package's own Python code makes them (its layers,
wrappers and autograd Functions call `ops.<name>(...)`), completed by what
the op's C++ checks, read the way `publisher adopt` reads an extension's
callers (publisher/adopt/inputs.py). The ops and their schemas come from the
`def("...")` registrations in the project's torch sources.

Written as JSON for the smoke test (default_test.py), which runs where
publisher cannot be imported: op -> {"site": where the inputs come from,
"arguments": [one entry per argument, inputs.Argument's fields]}. Nothing
here runs the kernel's code; what it cannot read leaves the op to guesses."""

from __future__ import annotations

import re
from pathlib import Path

from publisher.adopt import cpp, inputs, schema, sources
from publisher.adopt.model import Op
from publisher.adopt.types import CType, Unsupported
from publisher.project.model import Project

# `ops.def("name(Tensor x, int n) -> Tensor")`, adjacent literals joined
_DEF = re.compile(r"\.\s*def\s*\(\s*((?:(?:u8)?\"(?:[^\"\\\n]|\\.)*\"\s*)+)[,)]")
# `ops.impl("name", torch::kCUDA, &function)`: the function whose C++ checks say what the op takes
_IMPL = re.compile(r"\.\s*impl\s*\(\s*\"(\w+)\"\s*,\s*(?:([\w:]+)\s*,\s*)?&?\s*([\w:]+)\s*\)")
_DISPATCH_KEYS = {"cpu": "kCPU", "cuda": "kCUDA", "rocm": "kCUDA", "xpu": "kXPU", "metal": "kMPS"}
_CPP = (".cpp", ".cc", ".cxx", ".cu", ".h", ".hpp", ".cuh", ".hip", ".mm")


def _texts(project: Project, backend: str) -> dict[str, str]:
    """The C++ sources and headers the variant is built from, relative path -> text."""
    config = project.config
    listed = list(config.framework.src)
    for kernel in config.kernels_for(backend):
        listed += kernel.src
    out: dict[str, str] = {}
    for rel in listed:
        if rel.endswith(_CPP) and project.root is not None:
            text = sources.read_text(project.root / rel)
            if text is not None:
                out[rel] = text
    return out


def _implementations(texts: dict[str, str], backend: str) -> dict[str, str]:
    """op -> the C++ function registered for it, this backend's first."""
    out: dict[str, str] = {}
    for text in texts.values():
        for match in _IMPL.finditer(text):
            name, key, function = match.groups()
            if name not in out or (key or "").endswith(_DISPATCH_KEYS.get(backend, "-")):
                out[name] = function
    return out


def registered_ops(texts: dict[str, str], backend: str) -> list[Op]:
    """Every op a `def("schema")` in these sources registers with its schema written out, bound to the
    function registered for `backend`."""
    functions = _implementations(texts, backend)
    ops: dict[str, Op] = {}
    for rel, text in texts.items():
        for match in _DEF.finditer(text):
            literal = cpp.string_literal(match.group(1))
            if not literal:
                continue
            _, name, rest = schema.split_name(literal)
            if not rest or "." in name:  # no schema written (torch infers it), or an overload: the default only
                continue
            try:
                _, args, returns = schema.parse(f"{name}{rest}")
            except (Unsupported, ValueError):
                continue
            line = text.count("\n", 0, match.start()) + 1
            ops.setdefault(name, Op(name, functions.get(name, ""), args, returns or CType("void", "void", "()"), None, rel, line,
                                    written=f"{name}{rest}", registered_by="library"))
    return list(ops.values())


def _entry(argument: inputs.Argument) -> dict:
    out = {"name": argument.name, "kw_only": argument.kw_only, "kind": argument.kind}
    if argument.tensor is not None:
        t = argument.tensor
        out.update(dtype=t.dtype, shape=list(t.shape), device=t.device, fill=t.value,
                   zeros=argument.mutable or t.integer, free_dtype=argument.free_dtype)
    if argument.value is not None:
        out["value"] = argument.value
    return out


def package_inputs(project: Project, variant_dir: Path, backend: str) -> dict[str, dict]:
    """op -> the inputs the kernel's own code gives it (see the module's text); ops it says nothing of are
    absent."""
    texts = _texts(project, backend)
    ops = registered_ops(texts, backend)
    if not ops:
        return {}
    try:
        derived = inputs.derive(variant_dir, ops, (), texts)
    except Exception:  # noqa: BLE001 - code the reader cannot follow: the smoke test guesses, as without it
        return {}
    out: dict[str, dict] = {}
    for op in ops:
        found = derived.get(op.name)
        if found is None:
            continue
        out[op.name] = {"site": found.site, "arguments": [_entry(a) for a in inputs.arguments(op, found)]}
    return out
