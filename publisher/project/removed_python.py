"""Python modules of torch that torch removed (torch._six), found in a
project's Python, and the port of the uses whose replacement is exact. The
Python side of project/removed_apis.py: the same table
(resources/removed_torch_apis.yaml, `python_modules`), the same ApiUse and
PortedFile values, so `check`, `adopt` and `migrate --sources` report and port
both alike. Read with `ast`: comments, strings and names that merely look
alike never count; a file that does not parse is left alone."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from publisher.data import read_yaml
from publisher.project.removed_apis import ApiUse, PortedFile, RemovedApi


@dataclass(frozen=True)
class RemovedModule:
    id: str
    module: str  # torch._six
    names: tuple[tuple[str, str, str | None], ...]  # attribute, replacement expression, module it needs
    exact: RemovedApi  # a use the port replaces
    other: RemovedApi  # a use left for hands

    def replacement(self, name: str) -> tuple[str, str | None] | None:
        for attr, expr, needs in self.names:
            if attr == name:
                return expr, needs
        return None


@cache
def modules() -> tuple[RemovedModule, ...]:
    out = []
    for entry in read_yaml("removed_torch_apis.yaml").get("python_modules") or []:
        names = tuple((str(k), str(v["expr"]), v.get("import")) for k, v in (entry.get("names") or {}).items())
        common = dict(name=entry["name"], pattern=re.compile(re.escape(entry["module"])), reference=entry["reference"],
                      removed_in=entry.get("removed_in"), deprecated_in=entry.get("deprecated_in"),
                      example=entry.get("example"))
        out.append(RemovedModule(
            id=entry["id"], module=entry["module"], names=names,
            exact=RemovedApi(id=entry["id"], replacement=entry["replacement"], rewrite="exact", **common),
            other=RemovedApi(id=entry["id"], replacement=entry["replacement"], **common)))
    return tuple(out)


def is_python(path: Path) -> bool:
    return path.suffix == ".py"


@dataclass(frozen=True)
class _Edit:
    start: tuple[int, int]  # (line, column) where the replaced text starts
    end: tuple[int, int]
    new: str
    use: ApiUse | None  # None: an import the replacements need
    needs: tuple[str, ...] = ()


def _lines_alone(lines: list[str], node: ast.stmt) -> bool:
    """Whether a statement has its lines to itself (nothing before it, only a comment after)."""
    before = lines[node.lineno - 1][:node.col_offset]
    after = lines[node.end_lineno - 1][node.end_col_offset:]
    return not before.strip() and (not after.strip() or after.strip().startswith("#"))


def _analyse(text: str, file: str) -> tuple[list[_Edit], list[ApiUse]]:
    """The exact edits a port makes, and the uses left for hands."""
    if not any(m.module.rpartition(".")[2] in text for m in modules()):
        return [], []  # every use names the module (`_six`): a file that never does is not parsed
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [], []
    lines = text.splitlines()
    edits: list[_Edit] = []
    left: list[ApiUse] = []
    for removed in modules():
        parent, _, leaf = removed.module.rpartition(".")
        roots = {parent} | {a.asname for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                            if a.name == parent and a.asname}
        aliases: set[str] = set()  # names the removed module itself is bound to
        imports: list[ast.stmt] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == removed.module and not node.level:
                use = ApiUse(removed.exact, file, node.lineno, node.col_offset + 1, _segment(lines, node))
                known = [(a, removed.replacement(a.name)) for a in node.names]
                if all(r is not None for _, r in known) and _lines_alone(lines, node):
                    targets = ", ".join(a.asname or a.name for a, _ in known)
                    values = ", ".join(r[0] for _, r in known)
                    edits.append(_Edit((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset),
                                       f"{targets} = {values}", use, tuple(r[1] for _, r in known if r[1])))
                else:
                    missing = [a.name for a, r in known if r is None]
                    left.append(ApiUse(removed.other, file, node.lineno, node.col_offset + 1,
                                       f"from {removed.module} import {', '.join(missing) or '...'}"))
            elif isinstance(node, ast.ImportFrom) and node.module == parent and not node.level \
                    and any(a.name == leaf for a in node.names):
                aliases |= {a.asname or a.name for a in node.names if a.name == leaf}
                imports.append(node)
            elif isinstance(node, ast.Import) and any(a.name == removed.module for a in node.names):
                aliases |= {a.asname for a in node.names if a.name == removed.module and a.asname}
                imports.append(node)
        reported: set[int] = set()  # the module's own node in a use already reported
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            value = node.value
            chained = isinstance(value, ast.Attribute) and value.attr == leaf and isinstance(value.value, ast.Name) \
                and value.value.id in roots
            aliased = isinstance(value, ast.Name) and value.id in aliases
            if not (chained or aliased):
                continue
            text_used = _segment(lines, node)
            found = removed.replacement(node.attr)
            if found is None or isinstance(node.ctx, (ast.Store, ast.Del)):
                left.append(ApiUse(removed.other, file, node.lineno, node.col_offset + 1, text_used))
                reported.add(id(value))
                continue
            expr, needs = found
            edits.append(_Edit((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset), expr,
                               ApiUse(removed.exact, file, node.lineno, node.col_offset + 1, text_used),
                               (needs,) if needs else ()))
        for node in ast.walk(tree):  # the module named bare (passed around, or a chain the walk above did not port)
            if id(node) in reported:
                continue
            if isinstance(node, ast.Attribute) and node.attr == leaf and isinstance(node.value, ast.Name) \
                    and node.value.id in roots and not any(_inside(node, e) for e in edits):
                left.append(ApiUse(removed.other, file, node.lineno, node.col_offset + 1, _segment(lines, node)))
            elif isinstance(node, ast.Name) and node.id in aliases and not any(_inside(node, e) for e in edits):
                left.append(ApiUse(removed.other, file, node.lineno, node.col_offset + 1, node.id))
        for node in imports:
            # importing the module fails on every torch that removed it: gone once nothing uses it any more
            use = ApiUse(removed.exact, file, node.lineno, node.col_offset + 1, _segment(lines, node))
            others = [a for a in node.names if a.name not in (leaf, removed.module)]
            if others or not _lines_alone(lines, node) or any(u.api is removed.other for u in left):
                left.append(ApiUse(removed.other, file, node.lineno, node.col_offset + 1, _segment(lines, node)))
            else:  # `import torch._six` binds `torch` too: it stays bound, unless the file imports it itself
                keeps = isinstance(node, ast.Import) and not any(a.asname for a in node.names) \
                    and parent not in {a.name for n in tree.body if isinstance(n, ast.Import) and n is not node
                                       for a in n.names if not a.asname}
                edits.append(_Edit((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset),
                                   f"import {parent}" if keeps else "pass" if node.col_offset else "", use))
    return edits, sorted(left, key=lambda u: (u.line, u.column))


def _inside(node: ast.AST, edit: _Edit) -> bool:
    return edit.start <= (node.lineno, node.col_offset) and (node.end_lineno, node.end_col_offset) <= edit.end


def _segment(lines: list[str], node: ast.AST) -> str:
    if node.lineno == node.end_lineno:
        return lines[node.lineno - 1][node.col_offset:node.end_col_offset].strip()
    return lines[node.lineno - 1][node.col_offset:].strip() + " ..."


def scan_python(text: str, file: str) -> list[ApiUse]:
    """Every use of a removed torch module in one Python file, in order."""
    edits, left = _analyse(text, file)
    return sorted([e.use for e in edits] + left, key=lambda u: (u.line, u.column))


def port_python(text: str, file: str) -> PortedFile:
    """One Python file with every exact replacement made, and the imports they need added once, before the
    first use (after the last top-level import above it); what is left is rescanned."""
    edits, _ = _analyse(text, file)
    if not edits:
        return PortedFile(text, (), tuple(scan_python(text, file)))
    edits += _import_edits(text, edits)
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(pos: tuple[int, int]) -> int:
        if pos[0] > len(lines):
            return len(text)
        return offsets[pos[0] - 1] + len(lines[pos[0] - 1].encode("utf-8")[:pos[1]].decode("utf-8", "replace"))

    out = text
    for edit in sorted(edits, key=lambda e: (e.start, e.use is not None), reverse=True):
        start, end = at(edit.start), at(edit.end)
        if edit.new == "" and (start == 0 or out[start - 1] == "\n") and out[end:end + 1] == "\n":
            end += 1  # a whole line deleted
        out = out[:start] + edit.new + out[end:]
    ported = [e.use for e in edits if e.use is not None]
    return PortedFile(out, tuple(sorted(ported, key=lambda u: (u.line, u.column))), tuple(scan_python(out, file)))


def _import_edits(text: str, edits: list[_Edit]) -> list[_Edit]:
    """`import M` for each module the replacements need that the file does not import at the top level, as
    one insertion before the first replacement needing it: after the last top-level import above that
    replacement (else after the docstring and `from __future__` imports)."""
    needed = [e for e in edits if e.needs]
    if not needed:
        return []
    tree = ast.parse(text)
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    have = {a.name for n in top if isinstance(n, ast.Import) for a in n.names if not a.asname}
    missing = [m for m in dict.fromkeys(n for e in needed for n in e.needs) if m not in have]
    if not missing:
        return []
    first = min(e.start[0] for e in needed)
    above = [n.end_lineno for n in top if n.end_lineno < first and not _replaced(n, edits)]
    if above:
        after = max(above)
    else:
        after = 0
        for node in tree.body:
            docstring = node is tree.body[0] and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str)
            future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
            if not (docstring or future) or node.end_lineno >= first:
                break
            after = node.end_lineno
    return [_Edit((after + 1, 0), (after + 1, 0), "".join(f"import {m}\n" for m in missing), None)]


def _replaced(node: ast.stmt, edits: list[_Edit]) -> bool:
    return any(e.start == (node.lineno, node.col_offset) for e in edits)
