"""The project's Python API, carried into torch-ext/<package>/: the former
extension module becomes a module of aliases over the torch ops (`fn =
ops.fn`), and the project's own modules are copied with their imports of the
extension and of their own package made relative (kernels imports a variant
under its ops id, not under the package's name). Statements are located with
the ast module and edited as text, so everything else stays as written."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

from publisher.adopt.model import MARKER, WRITTEN, Op
from publisher.codes import finding
from publisher.findings import Finding

OPS_MODULE = "_ops"  # the module kernel-builder's build writes: `ops`, `add_op_namespace_prefix`
_LIBRARY_CALLS = ("custom_op", "register_fake", "register_autograd", "define", "impl", "register_kernel", "Library",
                  "impl_abstract", "register_torch_dispatch", "register_vmap", "register_autocast", "triton_op",
                  "get_kernel", "opcheck")
_LOOKUPS = ("import_module", "find_spec", "find_loader")  # calls that find a module by its name
_OPS_NAMES = ("ops", "_kernel_ops")  # the name the kernel's ops get in a carried file: the first one it does not use


@dataclass(frozen=True)
class ImportContext:
    """What the imports of one carried file are rewritten against."""

    extensions: dict[str, str]  # old module name -> its module path inside the package ("fused_ssim_cuda", "sub._C")
    package: str | None  # the package's old import name (absolute self-imports become relative)
    depth: int  # how many folders the file is below the package root
    # op namespaces the project registers its ops in (TORCH_LIBRARY, torch.library.custom_op, ...): the kernel's own now
    namespaces: frozenset[str] = frozenset()


def _dots(ctx: ImportContext) -> str:
    return "." * (ctx.depth + 1)


def _relative(ctx: ImportContext, inside: str) -> tuple[str, str]:
    """(`from` part, imported name) for a module at `inside` (dotted, relative to the package root)."""
    parent, _, leaf = inside.rpartition(".")
    return _dots(ctx) + parent, leaf


def _target(ctx: ImportContext, module: str) -> str | None:
    """Where an absolutely imported module now lives inside the package (dotted, relative to its root), or None."""
    for old, inside in ctx.extensions.items():
        if module == old:
            return inside
        if module.startswith(old + "."):
            return None  # a module below a compiled extension: not a thing
    if ctx.package and (module == ctx.package or module.startswith(ctx.package + ".")):
        return module[len(ctx.package) + 1:] if module != ctx.package else ""
    return None


def rewrite(text: str, file: str, ctx: ImportContext, loads: dict[str, str],
            sites: dict[int, str] | None = None) -> tuple[str, list[Finding]]:
    """`text` with its imports of the extension(s) and of its own package made relative, and each
    `X = load(name="M", ...)` of an adopted extension replaced by an import of the module that replaces it.
    `loads` maps a load() name to the module path inside the package; `sites` maps the line of a module-level
    `X = <call>` that builds an extension through a function of the file (`_knn = load_cpp_ext("knn")`) to
    the load() name it builds."""
    sites = sites or {}
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        return text, [finding("PA121", f"not valid Python ({err.msg}); carried unchanged", file=file, line=err.lineno)]
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (first line, last line, replacement), 1-based inclusive
    findings: list[Finding] = []
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}  # names the file reads or binds
    spans: list[tuple[int, int, int, int, str]] = []
    rebound = _self_rooted(tree, ctx, spans, used)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            replacement = _rewrite_import(node, ctx, file, findings, used, rebound)
            if replacement is not None:
                edits.append((node.lineno, node.end_lineno, _indent(lines, node) + replacement + _tail(lines, node)))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            inside = _target(ctx, node.module)
            if inside is None:
                continue
            line_text = "".join(lines[node.lineno - 1:node.end_lineno])
            replacement = _from_import(ctx, inside, node)
            if replacement is None:
                new_head = re.sub(r"^(\s*from\s+)" + re.escape(node.module).replace(r"\.", r"\s*\.\s*") + r"(\s+import\b)",
                                  lambda m, inside=inside: m.group(1) + _dots(ctx) + inside + m.group(2), line_text, count=1)
            else:
                new_head = _indent(lines, node) + replacement + _tail(lines, node)
            edits.append((node.lineno, node.end_lineno, new_head))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            replacement = _ops_module_import(node)
            if replacement is not None:
                edits.append((node.lineno, node.end_lineno, _indent(lines, node) + replacement + _tail(lines, node)))
        elif isinstance(node, ast.Assign) and node in tree.body and sites.get(node.lineno) in loads \
                and not (isinstance(node.value, ast.Call) and _is_load(node.value)) \
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, target = sites[node.lineno], node.targets[0].id
            frm, leaf = _relative(ctx, loads[name])
            stmt = f"from {frm} import {leaf}" + (f" as {target}" if target != leaf else "")
            stmt += f"  # {MARKER}: was built by load(name={name!r}, ...)"
            edits.append((node.lineno, node.end_lineno, _indent(lines, node) + stmt + "\n"))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _is_load(node.value):
            name = _load_name(node.value)
            if name in loads and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target = node.targets[0].id
                frm, leaf = _relative(ctx, loads[name])
                stmt = f"from {frm} import {leaf}" + (f" as {target}" if target != leaf else "")
                stmt += f"  # {MARKER}: was load(name={name!r}, ...)"
                edits.append((node.lineno, node.end_lineno, _indent(lines, node) + stmt + "\n"))
            elif name in loads:
                findings.append(finding("PA121", f"load(name={name!r}) whose result is not assigned to a name",
                                        file=file, line=node.lineno, hint="import the module from the package instead"))
        elif isinstance(node, ast.Call):
            findings += _dynamic_lookup(node, ctx, file)
            if not ctx.namespaces:
                findings += _fixed_namespace(node, file)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _is_load(node.value):
            findings.append(finding("PA121", "a load() call whose result is not kept", file=file, line=node.lineno))
    lookups = _lookups(tree, ctx, file, spans, findings)
    loading = _library_loads(tree, ctx, lines, edits, findings, file)
    name = next(n for n in _OPS_NAMES if n not in _bound_names(tree)) if ctx.namespaces else "ops"
    ops_used, prefix_used = _namespace_spans(tree, ctx.namespaces, name, "add_op_namespace_prefix", spans)
    if not ctx.namespaces:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _fixed_ops(node) is not None and \
                    node.attr not in ("aten", "prims", "higher_order", "load_library", "import_module"):
                findings.append(finding("PA122", f"`torch.ops.{node.attr}` names a fixed op namespace; the kernel's ops "
                                        "live under its own (`ops` from the package's _ops module)", file=file,
                                        line=node.lineno, hint="use `from ._ops import ops` and `ops.<name>`"))
                break
    text = _apply(_spliced(lines, spans, edits), edits)
    imports = []
    if ops_used or prefix_used:
        wanted = ([f"ops as {name}" if name != "ops" else "ops"] if ops_used else []) + \
                 (["add_op_namespace_prefix"] if prefix_used else [])
        imports.append(f"from {_dots(ctx)}{OPS_MODULE} import {', '.join(wanted)}")
    if loading and not ops_used and not prefix_used:
        imports.append(f"from {_dots(ctx)} import {OPS_MODULE}  # noqa: F401  loads the kernel's library")
    if lookups and not _imports_importlib_util(tree):
        imports.append("import importlib.util")
    return _add_imports(text, imports), findings


def _bound_names(tree: ast.Module) -> set[str]:
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _fixed_ops(node: ast.Attribute) -> str | None:
    """The namespace of `torch.ops.<ns>` (None for anything else)."""
    value = node.value
    if isinstance(value, ast.Attribute) and value.attr == "ops" and isinstance(value.value, ast.Name) and \
            value.value.id == "torch":
        return node.attr
    return None


def _namespace_spans(tree: ast.AST, namespaces: frozenset[str], ops_expr: str, prefix_expr: str,
                     spans: list[tuple[int, int, int, int, str]]) -> tuple[bool, bool]:
    """Edits that put the ops of `namespaces` under the kernel's own: `torch.ops.ns` -> `ops_expr`,
    `"ns::op"` given to torch.library -> `prefix_expr("op")`, `Library("ns", ...)` -> `Library(ops_expr.name, ...)`.
    (whether ops_expr is used, whether prefix_expr is used)"""
    ops_used = prefix_used = False
    if not namespaces:
        return False, False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _fixed_ops(node) in namespaces:
            spans.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, ops_expr))
            ops_used = True
        elif isinstance(node, ast.Call) and _library_call(node) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            first = node.args[0]
            ns, sep, op = first.value.partition("::")
            if sep and ns in namespaces:
                spans.append((first.lineno, first.col_offset, first.end_lineno, first.end_col_offset,
                               f'{prefix_expr}("{op}")'))
                prefix_used = True
            elif not sep and _library_call(node) == "Library" and first.value in namespaces:
                spans.append((first.lineno, first.col_offset, first.end_lineno, first.end_col_offset, f"{ops_expr}.name"))
                ops_used = True
    return ops_used, prefix_used


def _library_call(node: ast.Call) -> str | None:
    """The torch.library function a call names (`torch.library.register_fake`, `library.custom_op`,
    `Library`), else None."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _LIBRARY_CALLS and (
            isinstance(func.value, ast.Attribute) and func.value.attr == "library"
            or isinstance(func.value, ast.Name) and func.value.id == "library"):
        return func.attr
    if isinstance(func, ast.Name) and func.id in ("custom_op", "register_fake", "register_autograd", "impl_abstract",
                                                  "triton_op", "Library"):
        return func.id
    return None


def defined_namespaces(text: str) -> set[str]:
    """The op namespaces a Python file defines ops in: torch.library.custom_op / triton_op / define("ns::op"),
    torch.library.Library("ns", "DEF" | "FRAGMENT")."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant) \
                or not isinstance(node.args[0].value, str):
            continue
        kind = _library_call(node)
        value = node.args[0].value
        if kind in ("custom_op", "triton_op", "define") and "::" in value:
            out.add(value.split("::", 1)[0])
        elif kind == "Library" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and \
                node.args[1].value in ("DEF", "FRAGMENT"):
            out.add(value)
    return {ns for ns in out if re.fullmatch(r"[A-Za-z_]\w*", ns)}


def _library_loads(tree: ast.Module, ctx: ImportContext, lines: list[str], edits: list[tuple[int, int, str]],
                   findings: list[Finding], file: str) -> bool:
    """Each statement loading the extension's library by its path (`torch.ops.load_library(spec.origin)`, in the
    loop that looks its files up) replaced by an import of the kernel's ops module, which loads the kernel's
    library: at module level the whole top-level statement holding it, inside a function the call's statement."""
    if not ctx.namespaces:
        return False
    found = False
    for top in tree.body:
        calls = [n for n in ast.walk(top) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == "load_library" and isinstance(n.func.value, ast.Attribute)
                 and n.func.value.attr == "ops"]
        if not calls:
            continue
        found = True
        comment = f"  # {MARKER}: was torch.ops.load_library of the extension's library"
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for stmt in ast.walk(top):
                if isinstance(stmt, ast.Expr) and stmt.value in calls:
                    edits.append((stmt.lineno, stmt.end_lineno,
                                  _indent(lines, stmt) + f"from {_dots(ctx)} import {OPS_MODULE}{comment}\n"))
                    findings.append(finding("PA183", f"line {stmt.lineno} loaded the extension's library with "
                                            "torch.ops.load_library: replaced by an import of the kernel's ops module",
                                            file=file, line=stmt.lineno))
            continue
        start = top.decorator_list[0].lineno if getattr(top, "decorator_list", None) else top.lineno
        edits.append((start, top.end_lineno, f"from {_dots(ctx)} import {OPS_MODULE}{comment}\n"))
        findings.append(finding("PA183", f"lines {start}-{top.end_lineno} loaded the extension's library with "
                                "torch.ops.load_library: replaced by an import of the kernel's ops module", file=file,
                                line=start))
    return found


def _lookups(tree: ast.Module, ctx: ImportContext, file: str, spans: list[tuple[int, int, int, int, str]],
             findings: list[Finding]) -> bool:
    """`importlib.import_module("old")`, `importlib.util.find_spec("old")`, `importlib.find_loader("old")` and
    `pkgutil.find_loader("old")` of a former extension module: the same lookup of the carried module, relative to
    the package. Whether importlib.util is needed."""
    needs_util = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        first = node.args[0].value
        if name not in _LOOKUPS or not isinstance(first, str) or first not in ctx.extensions or len(node.args) > 1:
            continue
        relative = _dots(ctx) + ctx.extensions[first]
        if name == "import_module":
            head = ast.unparse(func)
        else:
            head = "importlib.util.find_spec"
            needs_util = True
        spans.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset,
                      f'{head}("{relative}", __package__)'))
        findings.append(finding("PA183", f"`{name}({first!r})` looks the extension up by its old name: now the carried "
                                f"module {relative!r} of the package", file=file, line=node.lineno))
    return needs_util


def _imports_importlib_util(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Import) and any(a.name == "importlib.util" for a in n.names) or
               isinstance(n, ast.ImportFrom) and n.module == "importlib" and any(a.name == "util" for a in n.names)
               for n in ast.walk(tree))


def _spliced(lines: list[str], spans: list[tuple[int, int, int, int, str]],
             edits: list[tuple[int, int, str]]) -> list[str]:
    """`lines` with each one-line span edit made (ast positions: 1-based lines, columns in UTF-8 bytes); spans on
    lines a whole-line edit replaces are left to that edit."""
    covered = {n for first, last, _ in edits for n in range(first, last + 1)}
    out = list(lines)
    for line, col, end_line, end_col, new in sorted(spans, key=lambda s: (s[0], s[1]), reverse=True):
        if line != end_line or line in covered:
            continue
        raw = out[line - 1].encode()
        out[line - 1] = (raw[:col] + new.encode() + raw[end_col:]).decode()
    return out


def _add_imports(text: str, imports: list[str]) -> str:
    """`imports` after the imports that open the file (after its docstring and __future__ imports when it opens
    with code): before any code that may use what they bind."""
    if not imports:
        return text
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    at = 0
    for index, node in enumerate(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)) or index == 0 and isinstance(node, ast.Expr) and \
                isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            at = node.end_lineno
        else:
            break
    block = "".join(f"{line}\n" for line in imports)
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    return "".join(lines[:at]) + block + "".join(lines[at:])


def _apply(lines: list[str], edits: list[tuple[int, int, str]]) -> str:
    out = list(lines)
    for first, last, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        out[first - 1:last] = [replacement]
    return "".join(out)


def _indent(lines: list[str], node: ast.stmt) -> str:
    line = lines[node.lineno - 1]
    return line[:len(line) - len(line.lstrip())]


def _tail(lines: list[str], node: ast.stmt) -> str:
    """What follows the statement on its last line (a comment), and the newline."""
    last = lines[node.end_lineno - 1]
    rest = last[node.end_col_offset:] if node.end_col_offset is not None else "\n"
    return rest if rest.endswith("\n") else rest + ("\n" if last.endswith("\n") else "")


def _self_rooted(tree: ast.Module, ctx: ImportContext, spans: list[tuple[int, int, int, int, str]],
                 used: set[str]) -> set[str]:
    """Roots of `import pkg.sub` imports of the package itself whose every use is `pkg.sub...` (Deformable-DETR
    style code calling `pkg.functions.f(...)`): the import becomes relative (`from . import sub`) and each
    `pkg.sub` the submodule's own name, an exact rewrite (spans get those edits). Returns those roots."""
    firsts: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                inside = _target(ctx, alias.name)
                if not alias.asname and "." in alias.name and inside:
                    firsts.setdefault(alias.name.split(".")[0], set()).add(inside.split(".")[0])
    if not firsts:
        return set()
    uses: dict[str, list[ast.Attribute]] = {root: [] for root in firsts}
    exact = {root for root, names in firsts.items() if not names & used}  # `functions` free to bind
    attributes = {id(n.value): n for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in firsts:
            parent = attributes.get(id(node))
            if not isinstance(node.ctx, ast.Load) or parent is None or parent.attr not in firsts[node.id]:
                exact.discard(node.id)  # bound again, or used as the package itself: not this rewrite
            else:
                uses[node.id].append(parent)
    for root in exact:
        for use in uses[root]:
            spans.append((use.lineno, use.col_offset, use.end_lineno, use.end_col_offset, use.attr))
    return exact


def _rewrite_import(node: ast.Import, ctx: ImportContext, file: str, findings: list[Finding],
                    used: set[str], rebound: set[str] = frozenset()) -> str | None:
    parts: list[str] = []
    changed = False
    for alias in node.names:
        inside = _target(ctx, alias.name)
        if inside is None:
            parts.append(f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
            continue
        if not alias.asname and "." in alias.name and inside and alias.name.split(".")[0] in rebound:
            # `import pkg.a.b` used as `pkg.a.b...`: `a` bound relatively (each use is rewritten to `a...`)
            first, _, rest = inside.partition(".")
            parts.append(f"from {_dots(ctx)} import {first}")
            if rest:
                frm, leaf = _relative(ctx, inside)
                parts.append(f"from {frm} import {leaf} as _{leaf}  # noqa: F401  loads {alias.name}")
            changed = True
            continue
        if not alias.asname and "." in alias.name and inside and alias.name.split(".")[0] not in used:
            # `import pkg.sub` for its effect only (pointnet2_ops/__init__.py): the submodule, relatively
            frm, leaf = _relative(ctx, inside)
            parts.append(f"from {frm} import {leaf}")
            changed = True
            continue
        if not alias.asname and "." in alias.name or inside == "":
            findings.append(finding("PA121", f"`import {alias.name}` reaches the package by its old name, which a "
                                    "loaded kernel does not have", file=file, line=node.lineno,
                                    hint="import what you use relatively (from . import ...)"))
            parts.append(f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
            continue
        frm, leaf = _relative(ctx, inside)
        bound = alias.asname or alias.name
        if leaf == OPS_MODULE:
            parts.append(f"from {frm}{OPS_MODULE} import ops" + (f" as {bound}" if bound != "ops" else ""))
        else:
            parts.append(f"from {frm} import {leaf}" + (f" as {bound}" if bound != leaf else ""))
        changed = True
    if not changed:
        return None
    return "; ".join(parts) if len(parts) > 1 else parts[0]


def _from_import(ctx: ImportContext, inside: str, node: ast.ImportFrom) -> str | None:
    """`from P import x` where x is the `_ops` extension module: the build's `_ops` holds `ops` instead."""
    names = []
    special = False
    for alias in node.names:
        full = f"{inside}.{alias.name}" if inside else alias.name
        bound = alias.asname or alias.name
        if full == OPS_MODULE:
            names.append(f"from {_dots(ctx)}{OPS_MODULE} import ops" + (f" as {bound}" if bound != "ops" else ""))
            special = True
        else:
            frm = _dots(ctx) + inside
            names.append(f"from {frm} import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
    return "; ".join(names) if special else None


def _ops_module_import(node: ast.ImportFrom) -> str | None:
    """`from . import _ops [as X]`: the extension module of a project that named it `_ops` (the agent-written
    layout); the build's `_ops` module holds the ops as `ops`."""
    if node.module is not None or not any(a.name == OPS_MODULE for a in node.names):
        return None
    dots = "." * node.level
    parts = []
    for alias in node.names:
        if alias.name == OPS_MODULE:
            bound = alias.asname or OPS_MODULE
            parts.append(f"from {dots}{OPS_MODULE} import ops" + (f" as {bound}" if bound != "ops" else ""))
        else:
            parts.append(f"from {dots} import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
    return "; ".join(parts)


def _is_load(call: ast.Call) -> bool:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return name in ("load", "load_inline") and _load_name(call) is not None


def _load_name(call: ast.Call) -> str | None:
    for kw in call.keywords:
        if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def _dynamic_lookup(node: ast.Call, ctx: ImportContext, file: str) -> list[Finding]:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("import_module", "find_spec", "find_loader", "__import__") or not node.args:
        return []
    first = node.args[0]
    if name in _LOOKUPS and len(node.args) == 1 and isinstance(first, ast.Constant) and first.value in ctx.extensions:
        return []  # ported (_lookups)
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and _target(ctx, first.value) is not None:
        return [finding("PA121", f"`{name}({first.value!r})` looks the extension up by its old module name",
                        file=file, line=node.lineno,
                        hint="the module is part of the package now: import it relatively (from . import ...)")]
    return []


def _fixed_namespace(node: ast.Call, file: str) -> list[Finding]:
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in _LIBRARY_CALLS and isinstance(func.value, ast.Attribute)
            and func.value.attr == "library"):
        return []
    first = node.args[0] if node.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and "::" in first.value:
        return [finding("PA122", f"torch.library.{func.attr}({first.value!r}) registers under a fixed namespace: two "
                        "builds loaded side by side collide, and upstream's build check expects "
                        "add_op_namespace_prefix", file=file, line=node.lineno,
                        hint=f"use add_op_namespace_prefix({first.value.split('::', 1)[1]!r}) from the package's _ops")]
    return []


# --- the project's tests ------------------------------------------------------------------------

def rewrite_tests(text: str, file: str, modules: dict[str, str], namespaces: frozenset[str] = frozenset(),
                  package: str | None = None) -> str:
    """A test file of the project with its absolute imports of the former extension module(s) and of the old
    package name pointed at the kernel's package (`import causal_conv1d_cuda` -> `from causal_conv1d import
    causal_conv1d_cuda`): `publisher test` puts each built variant first on the path under the package's
    name. `modules`: old module -> its module in the kernel's package (dotted, absolute). The ops of
    `namespaces` are the kernel's own: `torch.ops.ns.x` -> `package._ops.ops.x` (opcheck and the like)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []

    def moved(name: str) -> str | None:
        for old, new in modules.items():
            if name == old:
                return new
            if name.startswith(old + ".") and old != new:
                return new + name[len(old):]
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            parts, changed = [], False
            for alias in node.names:
                new = moved(alias.name)
                if new is None or new == alias.name:
                    parts.append(f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
                    continue
                bound = alias.asname or alias.name
                if "." in alias.name and not alias.asname:
                    # `import old.sub` binds `old`: bind it to the new package, and import the submodule
                    top = alias.name.split(".")[0]
                    parts.append(f"import {new}; import {moved(top) or top} as {top}")
                elif "." in new:
                    parent, _, leaf = new.rpartition(".")
                    parts.append(f"from {parent} import {leaf}" + (f" as {bound}" if bound != leaf else ""))
                else:
                    parts.append(f"import {new}" + (f" as {bound}" if bound != new else ""))
                changed = True
            if changed:
                edits.append((node.lineno, node.end_lineno, _indent(lines, node) + "; ".join(parts) + _tail(lines, node)))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and moved(node.module):
            new = moved(node.module)
            if new != node.module:
                names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
                edits.append((node.lineno, node.end_lineno, _indent(lines, node) + f"from {new} import {names}"
                              + _tail(lines, node)))
    spans: list[tuple[int, int, int, int, str]] = []
    used = namespaces and package and any(_namespace_spans(tree, namespaces, f"{package}.{OPS_MODULE}.ops",
                                                           f"{package}.{OPS_MODULE}.add_op_namespace_prefix", spans))
    new = _apply(_spliced(lines, spans, edits), edits)
    return _add_imports(new, [f"import {package}.{OPS_MODULE}"]) if used else new


def imports_package(text: str, package: str) -> bool:
    """Whether a test file imports the package `package` (or a module of it), or loads a kernel."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == package for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == package:
            return True
    return "get_kernel" in text or "get_local_kernel" in text


# --- generated modules -------------------------------------------------------------------------

def alias_module(module: str, ops: Sequence[Op], depth: int, functions: Sequence[str] | None = None) -> str:
    """The module that replaces the extension module `module`: its functions, as the ops."""
    wanted = [op for op in ops if functions is None or op.name in functions]
    if wanted:
        lines = [f'"""{WRITTEN}: the extension module `{module}`, each function it bound now a torch op',
                 'registered by the build (torch-ext/ holds the schemas), called as before."""', "",
                 f"from {'.' * (depth + 1)}{OPS_MODULE} import ops", ""]
    else:
        lines = [f'"""{WRITTEN}: the extension module `{module}`. Importing it loads the kernel\'s library,',
                 'whose ops register themselves (as the extension\'s did)."""', "",
                 f"from {'.' * (depth + 1)}{OPS_MODULE} import ops  # noqa: F401", ""]
    for op in wanted:
        lines.append(f"{op.name} = ops.{op.name}" + (f"  # {_one_line(op.doc)}" if op.doc else ""))
    lines += ["", "__all__ = [" + ", ".join(f'"{op.name}"' for op in wanted) + "]", ""]
    return "\n".join(lines)


def generated_init(name: str, modules: Sequence[tuple[str, Sequence[str]]], carried: Sequence[str],
                   labels: Sequence[str]) -> str:
    """A package __init__ for a project that had none: the extension modules' functions at the top, and the
    project's carried modules as attributes, imported when first used (their import-time work, seeding or
    printing, does not run when the kernel loads). `modules`: (module path inside the package, function names)."""
    lines = [f'"""{WRITTEN}: the package `{name}`. The functions of the former extension module(s)',
             f"{', '.join(f'`{m}`' for m in labels)} are torch ops here; the project's own modules are carried",
             'alongside."""', ""]
    exported: list[str] = []
    if carried:
        lines += ["import importlib", ""]
    for inside, functions in modules:
        if functions:
            lines.append(f"from .{inside} import {', '.join(sorted(functions))}")
            exported += list(functions)
    exported += list(carried)
    lines += ["", "__all__ = [" + ", ".join(f'"{n}"' for n in sorted(set(exported))) + "]", ""]
    if carried:
        lines += ["_CARRIED = (" + "".join(f'"{m}", ' for m in sorted(carried)) + ")", "", "",
                  "def __getattr__(name):",
                  "    if name in _CARRIED:",
                  '        return importlib.import_module(f"{__name__}.{name}")',
                  '    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")', ""]
    return "\n".join(lines)


def imports_module(text: str, inside: str) -> bool:
    """Whether a (rewritten) package __init__ imports the module `inside` (relative) whenever it is imported:
    at module level, not under an `if` (fused-ssim imports its extension only when CUDA is there, and a
    kernel must register its ops on import wherever it loads)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    parent, _, leaf = inside.rpartition(".")
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            module = node.module or ""
            if module == inside or (module == parent and any(a.name == leaf for a in node.names)):
                return True
    return False


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."
