"""A C++ source compiled inside a namespace of its own (a wrapper file that
includes it), so that its functions cannot collide at link time with those of
another source of the same shared object.

torchsort's isotonic_cpu.cpp and isotonic_cuda.cu both define `isotonic_l2`
& co: two modules in the original, one .so in a cuda variant that carries the
CPU kernels too. The wrapper first replays the file's preprocessor skeleton
(its conditionals, macros and the includes of headers outside the project,
through the project headers it includes), so that every such header is
included at global scope before the namespace opens; inside it, their include
guards make the file's own includes no-ops, and only the project's code is
enclosed."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)(.*)$")
_INCLUDE = re.compile(r'^[ \t]*[<"]([^>"]+)[>"]')
_KEPT = {"if", "ifdef", "ifndef", "elif", "else", "endif", "define", "undef"}


def _directives(text: str) -> list[tuple[str, str, str]]:
    """(kind, rest, the whole directive as written, continuation lines joined) of each directive line."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i]
        i += 1
        m = _DIRECTIVE.match(line)
        if m:
            out.append((m.group(1), m.group(2).strip(), line.strip()))
    return out


def _without_guard(found: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """A header's directives less its include guard (#ifndef X / #define X ... #endif): replayed, the guard
    would be defined before the header is really included, and its code skipped."""
    if len(found) >= 3 and found[0][0] == "ifndef" and found[1][0] == "define" \
            and found[1][1].split()[:1] == found[0][1].split()[:1] and found[-1][0] == "endif":
        return found[2:-1]
    return found


def skeleton(rel: str, read: Callable[[str], str | None], resolve: Callable[[str, str, str], str | None]) -> list[str]:
    """The directive lines replayed before the namespace: read(rel) gives a project file's text,
    resolve(including file, quote, name) the project file an include names (None: outside the project)."""
    seen = {rel}

    def walk(path: str, header: bool) -> list[str]:
        text = read(path)
        if text is None:
            return []
        found = _directives(text)
        if header:
            found = _without_guard(found)
        out: list[str] = []
        for kind, rest, line in found:
            if kind in _KEPT:
                out.append(line)
            elif kind == "include":
                m = _INCLUDE.match(rest)
                if not m:
                    continue
                target = resolve(path, rest[0], m.group(1))
                if target is None:
                    out.append(line)
                elif target not in seen:
                    seen.add(target)
                    out += walk(target, True)
        return out

    return walk(rel, False)


def wrapper(source: str, wrapper_path: str, namespace: str, replayed: Sequence[str], note: str,
            ops_name: bool = False) -> str:
    """The wrapper's text: the replayed directives, then `source` included inside `namespace`. ops_name:
    the source registers its kernels under TORCH_EXTENSION_NAME, which the build defines for a unit
    that names it: the wrapper names it."""
    include = os.path.relpath(source, str(PurePosixPath(wrapper_path).parent)).replace(os.sep, "/")
    body = "\n".join(replayed)
    guard = ("#ifndef TORCH_EXTENSION_NAME\n"
             f'#error "{source} registers its kernels under TORCH_EXTENSION_NAME, which the build defines"\n'
             "#endif\n") if ops_name else ""
    return (f"// {note}\n{guard}"
            f"// Headers from outside the project first, at global scope, as {source} includes them:\n"
            f"{body}\n\n"
            f"namespace {namespace} {{\n"
            f'#include "{include}"\n'
            f"}}  // namespace {namespace}\n")


def balanced(replayed: Sequence[str]) -> bool:
    """Whether the replayed conditionals open and close in pairs (a file cut off mid-#if is not wrapped)."""
    depth = 0
    for line in replayed:
        kind = _DIRECTIVE.match(line).group(1)
        if kind in ("if", "ifdef", "ifndef"):
            depth += 1
        elif kind == "endif":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0

