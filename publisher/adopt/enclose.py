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
enclosed.

A namespace the enclosed code opens is a new one inside the wrapper's:
longcw/RoIAlign.pytorch's crop_and_resize.cpp defines its functions in
`namespace torch { ... }` and names `torch::Tensor` there, which the new
`publisher_..::torch` lacks. So the wrapper opens each such namespace first
with a using-directive for the global one of its name: qualified and
unqualified lookups that find nothing declared by the project go on to what the
headers declared, as in the original unit."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from publisher.adopt import cpp

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
    return _walk(rel, read, resolve)[0]


def enclosed_files(rel: str, read: Callable[[str], str | None],
                   resolve: Callable[[str, str, str], str | None]) -> list[str]:
    """`rel` and the project headers it includes (through each other): the files whose code is enclosed."""
    return _walk(rel, read, resolve)[1]


def _walk(rel: str, read: Callable[[str], str | None],
          resolve: Callable[[str, str, str], str | None]) -> tuple[list[str], list[str]]:
    seen = {rel}
    order = [rel]

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
                    order.append(target)
                    out += walk(target, True)
        return out

    return walk(rel, False), order


def opened_namespaces(texts: Sequence[str]) -> list[tuple[str, ...]]:
    """The named namespaces the texts open (`namespace a::b {`: ("a",), ("a", "b")), outer ones first;
    none inside an anonymous namespace (nothing outside it shares its names)."""
    found: dict[tuple[str, ...], None] = {}
    for text in texts:
        blocks = cpp.scopes(cpp.mask(text))
        for open_at, _, kind in sorted(blocks):
            if kind is None or kind in ("", "extern"):
                continue
            outer = [k for k in cpp.enclosing(blocks, open_at) if k != "extern"]
            if any(k is None or k == "" for k in outer):
                continue
            path = tuple(part for k in outer for part in k.split("::"))
            for part in kind.split("::"):
                path += (part,)
                found[path] = None
    return list(found)


def _bridges(namespace: str, opened: Sequence[tuple[str, ...]]) -> str:
    """Each namespace in `opened` declared at global scope, and again inside `namespace` with a using-directive
    for the global one."""
    if not opened:
        return ""
    tree: dict = {}
    for path in opened:
        node = tree
        for part in path:
            node = node.setdefault(part, {})

    def declare(name: str, inner: dict, prefix: tuple[str, ...], bridge: bool) -> str:
        path = (*prefix, name)
        body = [f"using namespace ::{'::'.join(path)};"] if bridge else []
        body += [declare(n, i, path, bridge) for n, i in inner.items()]
        return f"namespace {name} {{ {' '.join(body)} }}" if body else f"namespace {name} {{}}"

    globals_ = "".join(f"{declare(n, i, (), False)}\n" for n, i in tree.items())
    bridged = "".join(f"{declare(n, i, (), True)}\n" for n, i in tree.items())
    return ("// Namespaces the enclosed code opens: inside the wrapper's they are new ones, so each also sees the\n"
            "// global namespace of its name, where the headers above declare what the code uses from it:\n"
            f"{globals_}namespace {namespace} {{\n{bridged}}}  // namespace {namespace}\n\n")


def wrapper(source: str, wrapper_path: str, namespace: str, replayed: Sequence[str], note: str,
            ops_name: bool = False, opened: Sequence[tuple[str, ...]] = ()) -> str:
    """The wrapper's text: the replayed directives, then `source` included inside `namespace`. ops_name:
    the source registers its kernels under TORCH_EXTENSION_NAME, which the build defines for a unit
    that names it: the wrapper names it. opened: the namespaces the enclosed code opens
    (opened_namespaces), bridged to the global ones of their names."""
    include = os.path.relpath(source, str(PurePosixPath(wrapper_path).parent)).replace(os.sep, "/")
    body = "\n".join(replayed)
    guard = ("#ifndef TORCH_EXTENSION_NAME\n"
             f'#error "{source} registers its kernels under TORCH_EXTENSION_NAME, which the build defines"\n'
             "#endif\n") if ops_name else ""
    return (f"// {note}\n{guard}"
            f"// Headers from outside the project first, at global scope, as {source} includes them:\n"
            f"{body}\n\n"
            f"{_bridges(namespace, opened)}"
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

