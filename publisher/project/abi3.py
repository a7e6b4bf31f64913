"""Compiled sources that cannot compile where kernel-builder compiles them: the
limited Python API every torch binding and kernel is built against has no
room for pybind11 (the facts: resources/abi3_sources.yaml). Only translation
units are read, and only what they include unconditionally, outside comments."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from publisher.codes import finding
from publisher.data import read_yaml
from publisher.findings import Finding

TRANSLATION_UNITS = (".cpp", ".cc", ".cxx", ".c", ".cu", ".mm", ".hip")
MAX_BYTES = 4 * 1024 * 1024  # a source larger than this is not read (generated tables)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)(.*)$")
_INCLUDE = re.compile(r"""^\s*[<"]([^>"]+)[>"]""")


@cache
def _rules() -> tuple[tuple[str, ...], re.Pattern, str]:
    facts = read_yaml("abi3_sources.yaml")
    macros = re.compile(r"\b(" + "|".join(map(re.escape, facts["macros"])) + r")\s*\(")
    return tuple(facts["includes"]), macros, " ".join(facts["fix"].split())


def _blank_comments(text: str) -> str:
    """Comments replaced by as many newlines as they span, so line numbers stay."""
    return _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def refused_lines(text: str) -> list[tuple[int, str]]:
    """(line, what) for each unconditional use of what the limited API refuses."""
    includes, macros, _ = _rules()
    found, depth = [], 0
    for number, line in enumerate(_blank_comments(text).split("\n"), 1):  # lines as compilers count them
        directive = _DIRECTIVE.match(line)
        if directive:
            word, rest = directive.groups()
            if word in ("if", "ifdef", "ifndef"):
                depth += 1
            elif word == "endif":
                depth = max(0, depth - 1)
            elif word == "include" and depth == 0:
                header = _INCLUDE.match(rest)
                name = header.group(1).strip() if header else ""
                if any(name == i or (i.endswith("/") and name.startswith(i)) for i in includes):
                    found.append((number, f"#include <{name}>"))
            continue
        macro = macros.search(line) if depth == 0 else None
        if macro:
            found.append((number, macro.group(1)))
    return found


def check_abi3_sources(root: Path, data: Mapping) -> list[Finding]:
    """PB407 for each translation unit listed under [torch] or [kernel.*] src that uses pybind11."""
    if not isinstance(data.get("torch"), Mapping):
        return []  # torch-noarch compiles nothing; tvm-ffi is not built against Python's API
    real_root = root.resolve()
    out: list[Finding] = []
    for field, path in _listed_units(data):
        target = root / path
        try:
            if not target.resolve().is_relative_to(real_root) or not target.is_file() \
                    or target.stat().st_size > MAX_BYTES:
                continue  # layout reports paths that do not exist or leave the project
            text = target.read_text(encoding="utf-8", errors="replace")
        except (OSError, RuntimeError, ValueError):
            continue
        for line, what in refused_lines(text):
            out.append(finding(
                "PB407", f"{path} uses {what} (pybind11), which does not compile against the limited Python API "
                         "(abi3) every kernel-builder variant is built with", field=field, file=str(target), line=line,
                hint=_rules()[2]))
    return out


def _listed_units(data: Mapping) -> list[tuple[str, str]]:
    tables = [("torch.src", data.get("torch"))]
    kernels = data.get("kernel")
    if isinstance(kernels, Mapping):
        tables += [(f"kernel.{name}.src", table) for name, table in kernels.items()]
    return [(field, path) for field, table in tables if isinstance(table, Mapping)
            for path in (table.get("src") if isinstance(table.get("src"), list) else [])
            if isinstance(path, str) and path.endswith(TRANSLATION_UNITS)]
