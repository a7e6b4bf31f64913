"""Ops a project registers with torch's own registration API -- TORCH_LIBRARY,
TORCH_LIBRARY_FRAGMENT and TORCH_LIBRARY_IMPL blocks (any dispatch key), and
the older `torch::RegisterOperators().op("ns::name", &fn)` static registration
-- read and ported to the kernel's own namespace, so that two builds load side
by side. The schemas stay as the author wrote them; where none is written
(`.op("ns::name", &fn)`) it comes from fn's C++ signature, as for pybind11.

The port swaps each registration head, in place, for its kernel-builder twin
under a guard that holds only where the build provides registration.h; the
author's own build compiles the file as before. Adopt reads its guards back
(`unport`), so a second run plans nothing new."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from publisher.adopt import binding, cpp, schema, types
from publisher.adopt.model import MARKER, Op
from publisher.codes import finding
from publisher.findings import Finding

GUARD = '#if __has_include("registration.h")'  # true in kernel-builder builds, which provide the header
_SWAP_NOTE = f"{MARKER}: the kernel's own op namespace"
_ADDED_NOTE = f"{MARKER}: added for kernel-builder builds"
_END = f"#endif  // {MARKER}"
_SWAPPED = re.compile(r"^" + re.escape(f"{GUARD}  // {_SWAP_NOTE}") + r"[^\n]*\n(.*?)^#else\n(.*?)^"
                      + re.escape(_END) + r"[^\n]*\n?", re.S | re.M)
_ADDED = re.compile(r"^" + re.escape(f"{GUARD}  // {_ADDED_NOTE}") + r"[^\n]*\n.*?^" + re.escape(_END)
                    + r"[^\n]*\n?", re.S | re.M)
_HEAD = re.compile(r"\b(TORCH_LIBRARY|TORCH_LIBRARY_FRAGMENT|TORCH_LIBRARY_IMPL)\s*\(")
_CHAIN = re.compile(r"\b(?:(?:torch|c10)\s*::\s*)?RegisterOperators\s*\(")
_LITERAL_CALL = re.compile(r"\b(def|impl|TORCH_SELECTIVE_SCHEMA|TORCH_SELECTIVE_NAME|schema)\s*\(\s*\"")


def unport(text: str) -> str:
    """The file as the author wrote it (adopt's registration guards read through)."""
    return _ADDED.sub("", _SWAPPED.sub(lambda m: m.group(2), text))


def has_registrations(text: str) -> bool:
    masked = cpp.mask(unport(text))
    return bool(_HEAD.search(masked) or _CHAIN.search(masked))


@dataclass(frozen=True)
class Head:
    """One TORCH_LIBRARY / TORCH_LIBRARY_FRAGMENT / TORCH_LIBRARY_IMPL block."""

    macro: str
    namespace: str
    key: str | None  # the dispatch key of an IMPL block
    var: str  # the library variable (`m`)
    block: cpp.Block
    head_end: int  # just past the `{`


@dataclass(frozen=True)
class Entry:
    """One `.op(...)` of a RegisterOperators statement."""

    literal: str  # "ns::name" or "ns::name(schema) -> ..."
    kernel: str  # the C++ expression registered, as written
    line: int


@dataclass(frozen=True)
class Chain:
    """A `RegisterOperators()` statement: where it is, and its ops."""

    start: int
    end: int  # just past the `;`
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class LibraryFile:
    file: str
    text: str  # as the author wrote it
    heads: tuple[Head, ...]
    chains: tuple[Chain, ...]
    ops: tuple[Op, ...]  # the ops the file defines (TORCH_LIBRARY/FRAGMENT defs, RegisterOperators)
    findings: tuple[Finding, ...]

    @property
    def namespaces(self) -> set[str]:
        """The namespaces the file defines ops in."""
        out = {h.namespace for h in self.heads if h.macro != "TORCH_LIBRARY_IMPL"}
        for chain in self.chains:
            for entry in chain.entries:
                ns, _, _ = schema.split_name(entry.literal)
                if ns:
                    out.add(ns)
        return out


def _heads(masked: str) -> list[Head]:
    out = []
    for m in _HEAD.finditer(masked):
        args_end = cpp.matching(masked, m.end() - 1)
        if args_end < 0:
            continue
        brace = re.compile(r"\s*\{").match(masked, args_end)
        if not brace:
            continue
        end = cpp.matching(masked, brace.end() - 1)
        if end < 0:
            continue
        args = [masked[a:b].strip() for a, b in cpp.split_top(masked, m.end(), args_end - 1)]
        impl = m.group(1) == "TORCH_LIBRARY_IMPL"
        if len(args) != (3 if impl else 2) or not re.fullmatch(r"\w+", args[0]):
            continue
        out.append(Head(m.group(1), args[0], args[1] if impl else None, args[-1],
                        cpp.Block(m.start(), brace.end() - 1, end), brace.end()))
    return out


def _chains(text: str, masked: str) -> tuple[list[Chain], list[Finding], list[int]]:
    """The RegisterOperators statements (and findings at those adopt cannot read, with their offsets)."""
    chains: list[Chain] = []
    problems: list[tuple[int, str]] = []
    blocks = cpp.scopes(masked)
    for m in _CHAIN.finditer(masked):
        if masked[m.start() - 2:m.start()] == "::" and not masked[:m.start()].rstrip(": ").endswith(("torch", "c10")):
            continue  # RegisterOperators::options(): part of a chain found already
        if any(kind is None for kind in cpp.enclosing(blocks, m.start())):
            problems.append((m.start(), "a RegisterOperators registration inside a function or class"))
            continue
        start = _statement_start(masked, m.start())
        close = cpp.matching(masked, m.end() - 1)
        if close < 0:
            continue
        entries: list[Entry] = []
        bad = None
        first = [text[a:b].strip() for a, b in cpp.split_top(masked, m.end(), close - 1)]
        if first != [""]:
            entry = _entry(text, first, cpp.line_of(text, m.start()))
            bad = bad or (None if entry else m.start())
            entries += [entry] if entry else []
        k = close
        while True:
            op = re.compile(r"\s*\.\s*op\s*\(").match(masked, k)
            if not op:
                break
            end = cpp.matching(masked, op.end() - 1)
            args = [text[a:b].strip() for a, b in cpp.split_top(masked, op.end(), end - 1)]
            entry = _entry(text, args, cpp.line_of(text, op.start()))
            if entry is None:
                bad = bad or op.start()
            else:
                entries.append(entry)
            k = end
        semi = re.compile(r"\s*;").match(masked, k)
        if semi is None or bad is not None:
            problems.append((bad if bad is not None else m.start(),
                             "a RegisterOperators registration adopt cannot read (options(), a schema that is not a "
                             "string literal, or more than a name and a kernel)"))
            continue
        chains.append(Chain(start, semi.end(), tuple(entries)))
    findings = [finding("PA171", f"{what}: not ported", line=cpp.line_of(text, offset),
                        hint="register the op in a TORCH_LIBRARY_FRAGMENT(ns, m) block (m.def(\"name(schema)\", &fn)), "
                             "then rerun publisher adopt") for offset, what in problems]
    return chains, findings, [offset for offset, _ in problems]


def _entry(text: str, args: list[str], line: int) -> Entry | None:
    if len(args) != 2 or "options()" in args[1].replace(" ", ""):
        return None
    literal = cpp.string_literal(args[0])
    ns, name, _ = schema.split_name(literal or "")
    if literal is None or not ns or not re.fullmatch(r"\w+(?:\.\w+)?", name):
        return None
    return Entry(literal, args[1], line)


def _statement_start(masked: str, k: int) -> int:
    j = k - 1
    while j >= 0 and masked[j] not in ";{}":
        if masked[j] == "\n" and masked[masked.rfind("\n", 0, j) + 1:j].lstrip().startswith("#"):
            break
        j -= 1
    j += 1
    while j < k and masked[j] in " \t\r\n":
        j += 1
    return j


def read_library(file: str, text: str, lookup: binding.Lookup, defines: Sequence[str]) -> LibraryFile | None:
    """The registrations of `text` (as the author wrote it) and the ops they define; None if it has none."""
    masked = cpp.mask(text)
    heads = _heads(masked)
    chains, findings, _ = _chains(text, masked)
    if not heads and not chains and not findings:
        return None
    findings = [replace(f, file=file) for f in findings]
    known = {d.split("=", 1)[0] for d in defines}
    ops: list[Op] = []
    bodies = [(h.var, h.block) for h in heads if h.macro != "TORCH_LIBRARY_IMPL"] + _helpers(masked)
    for var, block in bodies:
        conditions: list[bool | None] = []
        for kind, start, end in cpp.statements(masked, block.body_open + 1, block.end - 1):
            if kind == "directive":
                binding._directive(masked[start:end], conditions, known)
                continue
            state = binding._state(conditions)
            statement = masked[start:end].strip()
            if state is False or not re.match(rf"{re.escape(var)}\s*\.\s*def\s*\(", statement):
                continue
            open_at = masked.index("(", start)
            args = [text[a:b].strip() for a, b in cpp.split_top(masked, open_at + 1, cpp.matching(masked, open_at) - 1)]
            op = _defined(file, text, args, cpp.line_of(text, start), lookup, state is None)
            if op is not None:
                ops.append(op)
    for chain in chains:
        for entry in chain.entries:
            op, problems = _chain_op(file, entry, lookup)
            ops.append(op)
            findings += problems
    return LibraryFile(file, text, tuple(heads), tuple(chains), tuple(ops), tuple(findings))


def _helpers(masked: str) -> list[tuple[str, cpp.Block]]:
    """Functions a TORCH_LIBRARY block calls to define ops (`void register_aabb(torch::Library& m) {
    m.def(...); }`): their library parameter and body."""
    out = []
    for m in re.finditer(r"\(\s*(?:torch\s*::\s*)?Library\s*&\s*(\w+)\s*\)\s*\{", masked):
        end = cpp.matching(masked, m.end() - 1)
        if end > 0:
            out.append((m.group(1), cpp.Block(m.start(), m.end() - 1, end)))
    return out


def _defined(file: str, text: str, args: list[str], line: int, lookup: binding.Lookup, unsure: bool) -> Op | None:
    """The op of one `m.def(...)` in a TORCH_LIBRARY block, as the author registers it."""
    first = re.sub(r"^(?:TORCH_SELECTIVE_SCHEMA|TORCH_SELECTIVE_NAME|torch::schema)\s*\((.*)\)$", r"\1",
                   args[0] if args else "", flags=re.S).strip()
    literal = cpp.string_literal(first)
    if literal is None:
        return None
    _, name, rest = schema.split_name(literal)
    if rest:
        return _written_op(name, rest, file, line, unsure)
    op = None
    if len(args) > 1 and (function := binding.function_of(args[1])) is not None:
        op, _ = binding.op_from_function(name, function, file, line, lookup)
    # no schema written: torch infers it from the kernel when it registers the op
    return replace(op, registered_by="library", known=False) if op is not None else _unknown(name, args, file, line)


def _written_op(name: str, rest: str, file: str, line: int, unsure: bool = False) -> Op:
    written = f"{name}{rest}"
    base = name.split(".", 1)[0]
    try:
        _, args, returns = schema.parse(written)
    except types.Unsupported:
        return Op(base, "", (), types.CType("void", "void", "()"), None, file, line, written=written,
                  registered_by="library", known=False)
    return Op(base, "", args, returns, None, file, line, written=written, registered_by="library", known=not unsure)


def _unknown(name: str, args: list[str], file: str, line: int) -> Op:
    return Op(name.split(".", 1)[0], args[1] if len(args) > 1 else "", (), types.CType("void", "void", "()"), None,
              file, line, registered_by="library", known=False)


def _chain_op(file: str, entry: Entry, lookup: binding.Lookup) -> tuple[Op, list[Finding]]:
    _, name, rest = schema.split_name(entry.literal)
    if rest:
        return _written_op(name, rest, file, entry.line), []
    function = binding.function_of(entry.kernel)
    why = "a lambda or an expression"
    if function is not None:
        op, problems = binding.op_from_function(name, function, file, entry.line, lookup)
        if op is not None and not op.needs_shim:
            return replace(op, registered_by="library"), []
        why = problems[-1].message if problems else "a parameter type torch converts itself"
    return _unknown(name, ["", entry.kernel], file, entry.line), [finding(
        "PA172", f"`{name}`: no schema written, and adopt reads none from `{binding._short(entry.kernel, 50)}` ({why}); "
        "torch infers it when the op is registered, as before", file=file, line=entry.line)]


# --- the port ---------------------------------------------------------------------------------------

def port(text: str, lib: LibraryFile, namespaces: set[str], expand_library: bool) -> str:
    """`text` (the author's file, or it with its pybind11 module already ported) with the registrations of
    `namespaces` under the kernel's own namespace. `expand_library`: the file's first TORCH_LIBRARY stays one
    (TORCH_LIBRARY_EXPAND); otherwise every TORCH_LIBRARY becomes a fragment (a kernel has one TORCH_LIBRARY
    per namespace, and several files may have had their own)."""
    masked = cpp.mask(text)
    heads = [h for h in _heads(masked) if h.namespace in namespaces]
    chains, _, _ = _chains(text, masked)
    chains = [c for c in chains if any(schema.split_name(e.literal)[0] in namespaces for e in c.entries)]
    ops = {op.name: op for op in lib.ops}
    swaps: list[tuple[int, int, str]] = []  # (start, end, replacement) of the source
    literals: list[tuple[int, int, str]] = []
    library_kept = not expand_library
    for head in heads:
        if head.macro == "TORCH_LIBRARY" and not library_kept:
            new_head = f"TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, {head.var}) {{"
            library_kept = True
        elif head.macro == "TORCH_LIBRARY_IMPL":
            new_head = f"TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, {head.key}, {head.var}) {{"
        else:
            new_head = f"TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME, {head.var}) {{"
        swaps.append((head.block.start, head.head_end, new_head))
        for m in _LITERAL_CALL.finditer(masked, head.head_end, head.block.end):
            quote = m.end() - 1
            if text.startswith(f'"{head.namespace}::', quote):
                literals.append((quote + 1, quote + 1 + len(head.namespace) + 2, ""))  # names are the kernel's now
    for chain in chains:
        body = ["TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME, m) {  // was a RegisterOperators registration"]
        for entry in chain.entries:
            _, name, rest = schema.split_name(entry.literal)
            op = ops.get(name.split(".", 1)[0])
            spelled = f"{name}{rest}" if rest else (op.schema() if op is not None and op.known else None)
            if spelled is None:  # torch infers the schema, as RegisterOperators did
                body.append(f'  m.def("{name}", {entry.kernel});')
            else:
                # RegisterOperators leaves the alias analysis CONSERVATIVE (an op may write any argument, as
                # torch_scatter's do into `optional_out`); a schema string in a library is trusted as written
                # (FROM_SCHEMA), which lets TorchScript drop a call whose result is unused. Kept as it was.
                body.append(f'  m.def(torch::schema("{binding._escape(spelled)}", c10::AliasAnalysisKind::CONSERVATIVE), '
                            f"{entry.kernel});")
        body.append("}")
        swaps.append((chain.start, chain.end, "\n".join(body)))
    if not swaps:
        return text
    return _include(_apply(text, swaps, literals))


def _apply(text: str, swaps: list[tuple[int, int, str]], literals: list[tuple[int, int, str]]) -> str:
    """Each swap (a head, a RegisterOperators statement) made on its whole lines, under the guard, with the
    author's lines kept under #else; each literal edit (a name inside a block body) made in place, or in the
    kernel's branch where it falls on swapped lines."""
    spans: list[list] = []  # [line start, line end, edits]
    for start, end, new in sorted(swaps):
        ls = text.rfind("\n", 0, start) + 1
        le = text.find("\n", max(end - 1, start))
        le = len(text) if le < 0 else le + 1
        if spans and ls < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], le)
            spans[-1][2].append((start, end, new))
        else:
            spans.append([ls, le, [(start, end, new)]])
    pieces: list[tuple[int, int, str | list]] = []
    for start, end, new in literals:
        span = next((sp for sp in spans if sp[0] <= start < sp[1]), None)
        if span is None:
            pieces.append((start, end, new))
        else:
            span[2].append((start, end, new))
    pieces += [(ls, le, edits) for ls, le, edits in spans]
    out, at = [], 0
    for start, end, payload in sorted(pieces, key=lambda p: p[0]):
        out.append(text[at:start])
        if isinstance(payload, str):
            out.append(payload)
        else:
            original = text[start:end]
            new = original
            for s, e, n in sorted(payload, reverse=True):
                new = new[:s - start] + n + new[e - start:]
            if not original.endswith("\n"):
                original, new = original + "\n", new + "\n"
            out.append(f"{GUARD}  // {_SWAP_NOTE}\n{new}#else\n{original}{_END}\n")
        at = end
    out.append(text[at:])
    return "".join(out)


def _include(text: str) -> str:
    """registration.h (and torch/library.h) included, for kernel-builder builds only, after the file's last
    top-level #include (never inside a namespace or an #if of the author's)."""
    masked = cpp.mask(text, strings=False)
    block = (f"{GUARD}  // {_ADDED_NOTE}\n#include <torch/library.h>\n\n#include \"registration.h\"\n{_END}\n")
    last = None
    for m in re.finditer(r"^[ \t]*#[ \t]*include\b[^\n]*\n?", masked, re.M):
        if binding._depth(masked, m.start()) == 0 and not _in_namespace(masked, m.start()):
            last = m
    if last is None:
        return block + text
    prefix = text[:last.end()] if text[:last.end()].endswith("\n") else text[:last.end()] + "\n"
    return prefix + block + text[last.end():]


def _in_namespace(masked: str, offset: int) -> bool:
    return any(o < offset < c for o, c, _ in cpp.scopes(masked))
