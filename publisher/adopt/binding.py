"""The pybind11 module of an extension, read and ported: each
`m.def("name", &fn, ...)` becomes a torch op whose schema comes from fn's C++
signature. The port edits the binding file in place, inside guards, so one
file serves both builds: under Py_LIMITED_API (every kernel-builder build) it
registers the op kernels; otherwise (the project's own setup.py build) it is
the pybind11 module as before. What the port cannot carry is a finding at its
line, and that part is left out whole: nothing is half-converted."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache

from publisher.adopt import cpp, types
from publisher.adopt.model import MARKER, Op, OpArg
from publisher.codes import finding
from publisher.data import read_yaml
from publisher.findings import Finding

GUARD_END = f"#endif  // {MARKER}"
_PORTED = re.compile(r"^#ifdef Py_LIMITED_API  // " + re.escape(MARKER) + r"[^\n]*\n(.*?)^#else\n(.*?)^"
                     + re.escape(GUARD_END) + r"[^\n]*\n?", re.S | re.M)
_HIDDEN = re.compile(r"^#ifndef Py_LIMITED_API  // " + re.escape(MARKER) + r"[^\n]*\n(.*?)^"
                     + re.escape(GUARD_END) + r"[^\n]*\n?", re.S | re.M)
_PYBIND_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](torch/extension\.h|torch/python\.h|pybind11/[^>"]*)[>"][^\n]*\n?',
                             re.M)
# `namespace py = pybind11;` and `using namespace pybind11::literals;` (for "name"_a): pybind11 only, guarded with it
_PY_ALIAS = re.compile(r"^[ \t]*(?:namespace\s+\w+\s*=\s*(?:::)?pybind11|using\s+namespace\s+(?:::)?(?:pybind11|py)"
                       r"(?:::literals)?)\s*;[^\n]*\n?", re.M)
_PY_USE = re.compile(r"\b(?:py|pybind11)::\w+")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")

Lookup = Callable[[str], list[tuple[str, str, cpp.Declaration]]]  # function name -> (file, text, declaration)


HOST_BACKEND = "cpu"  # the backend whose dispatch key every variant's pybind11-ported kernels are registered for too


@cache
def _dispatch() -> dict:
    return read_yaml("adopt_types.yaml")["dispatch"]


def unport(text: str) -> str:
    """The file as it was before adopt guarded it (a file adopt never touched comes back unchanged)."""
    text = _PORTED.sub(lambda m: m.group(2), text)
    return _HIDDEN.sub(lambda m: m.group(1), text)


def has_module(text: str) -> bool:
    return bool(cpp.find_macro_block(cpp.mask(unport(text)), "PYBIND11_MODULE"))


@dataclass(frozen=True)
class Binding:
    """A file holding PYBIND11_MODULE: its ops, and what stays behind."""

    file: str  # relative path
    text: str  # as the author wrote it (unported)
    block: cpp.Block
    ops: tuple[Op, ...]
    findings: tuple[Finding, ...]
    # the file's other PYBIND11_MODULE blocks, under #if branches this flavour's build does not compile (one
    # module per build flavour: `#ifdef USE_CUDA ... #else ... #endif`)
    alternatives: tuple[cpp.Block, ...] = ()


def read_binding(file: str, text: str, lookup: Lookup, defines: Sequence[str]) -> Binding | None:
    """The ops of the (first) PYBIND11_MODULE in `text`, or None when it has none.
    `defines` are the macros the kernel-builder build defines for this file (NAME or NAME=VALUE)."""
    masked = cpp.mask(text)
    blocks = cpp.find_macro_block(masked, "PYBIND11_MODULE")
    if not blocks:
        return None
    known = {d.split("=", 1)[0] for d in defines}
    compiled = [(b, a) for b, a in blocks if _compiled(masked, b.start, known) is not False]
    if not compiled:
        return None  # every module of the file is in a branch this flavour's build leaves out
    (block, args), *others = compiled
    findings: list[Finding] = []
    for other, _ in others:
        findings.append(_hands(file, text, other.start, "a second PYBIND11_MODULE in one file",
                               "keep one module per file; adopt ports the first"))
    alternatives = tuple(b for b, _ in blocks if all(b is not c for c, _ in compiled))
    module_var = args[1] if len(args) > 1 else "m"
    ops: list[Op] = []
    conditions: list[bool | None] = []
    for kind, start, end in cpp.statements(masked, block.body_open + 1, block.end - 1):
        source = text[start:end].strip()
        if kind == "directive":
            _directive(masked[start:end], conditions, known)
            continue
        state = _state(conditions)
        statement = masked[start:end].strip()
        if re.match(rf"{re.escape(module_var)}\s*\.\s*def\s*\(", statement):
            if state is False:
                continue  # under a condition the build does not meet, as the compiler would skip it
            if state is None:
                findings.append(_hands(file, text, start, "m.def under a preprocessor condition adopt cannot evaluate",
                                       "move the m.def out of the #if, or make the condition one of -DNAME given by the "
                                       "build script"))
                continue
            op, problems = _read_def(file, text, masked, start, end, lookup)
            findings += problems
            if op is not None:
                ops.append(op)
        elif re.match(rf"{re.escape(module_var)}\s*\.\s*doc\s*\(\s*\)\s*=", statement):
            continue  # the module docstring has no place in a torch op library
        elif state is not False:
            what = _describe(statement, module_var)
            findings.append(_hands(file, text, start, f"{what} has no torch op equivalent: `{_short(source)}`",
                                   "write it in the package's Python code, or register it by hand"))
    names: dict[str, Op] = {}
    for op in ops:
        if op.name in names:
            findings.append(finding("PA112", f"`{op.name}` is bound twice (a pybind11 overload): an op has one schema",
                                    file=file, line=op.line, hint="give each overload its own name"))
        names.setdefault(op.name, op)
    duplicates = {op.name for op in ops if sum(o.name == op.name for o in ops) > 1}
    ops = [op for op in ops if op.name not in duplicates]
    for m in _PY_USE.finditer(masked):
        if not (block.start <= m.start() < block.end) and not _PY_ALIAS.match(masked, masked.rfind("\n", 0, m.start()) + 1):
            findings.append(_hands(file, text, m.start(), f"`{m.group(0)}` outside the module block: pybind11 does not "
                                   "compile against the limited API kernel-builder builds with",
                                   "take and return torch types (Tensor, double, int64_t, ...) instead"))
            break
    return Binding(file, text, block, tuple(ops), tuple(findings), alternatives)


def _compiled(masked: str, offset: int, known: set[str]) -> bool | None:
    """Whether the preprocessor compiles `offset` when the macros `known` are defined (None: a condition
    adopt cannot evaluate)."""
    conditions: list[bool | None] = []
    for m in re.finditer(r"^[ \t]*#[^\n]*", masked[:offset], re.M):
        _directive(m.group(0), conditions, known)
    return _state(conditions)


def _describe(statement: str, module_var: str) -> str:
    if re.match(r"(?:py|pybind11)::class_", statement):
        return "a pybind11 class"
    if re.match(r"(?:py|pybind11)::enum_", statement):
        return "a pybind11 enum"
    if re.match(rf"{re.escape(module_var)}\s*\.\s*attr\s*\(", statement):
        return "a module attribute"
    if "def_submodule" in statement:
        return "a submodule"
    return "this statement"


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _hands(file: str, text: str, offset: int, message: str, hint: str) -> Finding:
    return finding("PA111", message, file=file, line=cpp.line_of(text, offset), hint=hint)


def _directive(line: str, conditions: list[bool | None], known: set[str]) -> None:
    words = " ".join(line.lstrip("#").split())
    m = re.match(r"(ifdef|ifndef|if|elif|else|endif)\b\s*(.*)", words)
    if not m:
        return
    word, rest = m.groups()
    if word in ("ifdef", "ifndef"):
        value = rest.strip() in known
        conditions.append(value if word == "ifdef" else not value)
    elif word == "if":
        conditions.append(_evaluate(rest, known))
    elif word == "elif" and conditions:
        previous = conditions[-1]
        new = _evaluate(rest, known)
        conditions[-1] = None if previous is None or new is None else (False if previous else new)
    elif word == "else" and conditions:
        previous = conditions[-1]
        conditions[-1] = None if previous is None else not previous
    elif word == "endif" and conditions:
        conditions.pop()


def _evaluate(expression: str, known: set[str]) -> bool | None:
    """`defined(X)`, `!defined(X)`, `X` (a macro set to a number), `0`, `1`; None for anything else."""
    e = expression.strip()
    m = re.fullmatch(r"(!?)\s*defined\s*\(?\s*(\w+)\s*\)?", e)
    if m:
        return (m.group(2) in known) != bool(m.group(1))
    if e in ("0", "1"):
        return e == "1"
    return None


def _state(conditions: list[bool | None]) -> bool | None:
    if any(c is False for c in conditions):
        return False
    return None if any(c is None for c in conditions) else True


def _read_def(file: str, text: str, masked: str, start: int, end: int, lookup: Lookup) -> tuple[Op | None, list[Finding]]:
    line = cpp.line_of(text, start)
    open_at = masked.index("(", start)
    close = cpp.matching(masked, open_at)
    args = [(a, b) for a, b in cpp.split_top(masked, open_at + 1, close - 1)]
    arg_texts = [text[a:b].strip() for a, b in args]
    if len(arg_texts) < 2:
        return None, [finding("PA111", f"m.def without a function: `{_short(text[start:end])}`", file=file, line=line,
                              hint="bind a named function")]
    name = cpp.string_literal(arg_texts[0])
    if name is None or not _IDENT.match(name):
        return None, [finding("PA111", f"m.def name `{arg_texts[0]}` is not a literal identifier", file=file, line=line,
                              hint="name the op with a string literal that is a Python identifier")]
    if name in read_yaml("adopt_types.yaml")["reserved_op_names"]:
        return None, [finding("PA111", f"`{name}` cannot be an op name (torch.ops namespaces have an attribute of that "
                              "name)", file=file, line=line, hint="bind the function under another name")]
    function = function_of(arg_texts[1])
    if function is None:
        kind = "a lambda" if arg_texts[1].lstrip().startswith("[") else (
            "an overload selection" if "overload_cast" in arg_texts[1] or "static_cast" in arg_texts[1] else "an expression")
        return None, [finding("PA111", f"`{name}` binds {kind} (`{_short(arg_texts[1], 50)}`), whose signature adopt "
                              "cannot read", file=file, line=line,
                              hint="bind a named function (move the lambda body into one), then rerun publisher adopt")]
    doc, py_args, kw_from, problems = _extras(file, line, arg_texts[2:])
    op, more = op_from_function(name, function, file, line, lookup, py_args=py_args, kw_from=kw_from, doc=doc)
    return op, problems + more


def op_from_function(name: str, function: str, file: str, line: int, lookup: Lookup, *,
                     py_args: list[tuple[str, str | None]] = (), kw_from: int | None = None,
                     doc: str | None = None) -> tuple[Op | None, list[Finding]]:
    """The op `name` whose schema comes from the C++ signature of `function` (declared where `lookup`
    finds it): the rule for pybind11's m.def and for registrations that write no schema."""
    problems: list[Finding] = []
    py_args = list(py_args)
    declarations = _declarations(function, lookup)
    if not declarations:
        return None, problems + [finding("PA112", f"`{name}`: no declaration of `{function}` found in {file} or the "
                                         "project headers it includes", file=file, line=line,
                                         hint="declare the function in the binding file or a header it includes")]
    signatures = {(d.return_type, tuple(" ".join(cpp.parse_parameter(p).type.split()) for p in d.params))
                  for _, _, d in declarations}
    if len(signatures) > 1:
        return None, problems + [finding("PA112", f"`{name}`: `{function}` is overloaded ({len(signatures)} signatures)",
                                         file=file, line=line, hint="give each overload its own name and bind that")]
    decl_file, decl_text, decl = _best(declarations)
    if "template" in decl.specifiers:
        return None, problems + [finding("PA112", f"`{name}`: `{function}` is a template", file=decl_file,
                                         line=cpp.line_of(decl_text, decl.offset),
                                         hint="bind an explicit instantiation through a named function")]
    op_args: list[OpArg] = []
    params = [cpp.parse_parameter(p) for p in decl.params]
    if py_args and len(py_args) != len(params):
        problems.append(finding("PA113", f"`{name}`: {len(py_args)} py::arg for {len(params)} parameters; the C++ "
                                "names are used", file=file, line=line))
        py_args = []
    for index, param in enumerate(params):
        try:
            ctype = types.parse(param.type)
        except types.Unsupported as err:
            return None, problems + [finding("PA111", f"`{name}`: parameter {index + 1} ({param.name or 'unnamed'}): "
                                             f"{err}", file=decl_file, line=cpp.line_of(decl_text, decl.offset),
                                             hint="take torch types (Tensor, double, int64_t, bool, std::string, "
                                                  "std::vector<int64_t>, std::optional<Tensor>) or wrap the function")]
        py_name, py_default = py_args[index] if py_args else (None, None)
        arg_name = py_name or param.name or f"arg{index}"
        if not _IDENT.match(arg_name):
            arg_name = f"arg{index}"
        default = None
        written = py_default if py_default is not None else param.default
        if written is not None:
            default = types.schema_default(ctype, written)
            if default is None:
                problems.append(finding("PA113", f"`{name}`: the default `{written}` of `{arg_name}` is not carried "
                                        "into the schema; callers pass it", file=file, line=line))
        op_args.append(OpArg(arg_name, ctype, default, kw_only=kw_from is not None and index >= kw_from))
    seen_names: set[str] = set()
    for i, arg in enumerate(op_args):
        if arg.name in seen_names:
            op_args[i] = replace(arg, name=f"arg{i}")
        seen_names.add(op_args[i].name)
    if any(a.default is not None for a in op_args):
        op_args = _defaults_trail(op_args)
    try:
        returns = types.parse(decl.return_type, is_return=True)
    except types.Unsupported as err:
        return None, problems + [finding("PA111", f"`{name}`: returns {err}", file=decl_file,
                                         line=cpp.line_of(decl_text, decl.offset),
                                         hint="return torch types: Tensor, a std::tuple of them, std::vector<Tensor>, "
                                              "double, int64_t, bool")]
    return_alias = None
    if returns.kind == "tensor" and (returns.const_ref or returns.mutable):
        mutated = [a for a in op_args if a.ctype.kind == "tensor" and a.ctype.mutable]
        if returns.const_ref or len(mutated) != 1:
            return None, problems + [finding("PA111", f"`{name}`: returns a reference (`{decl.return_type}`) that adopt "
                                             "cannot tie to one mutated argument", file=decl_file,
                                             line=cpp.line_of(decl_text, decl.offset), hint="return a Tensor by value")]
        return_alias = mutated[0].name
    if returns.kind == "tuple" and any(i.needs_shim or i.kind not in ("tensor", "scalar") for i in returns.inner):
        return None, problems + [finding("PA111", f"`{name}`: returns `{decl.return_type}`, a tuple a shim would have "
                                         "to rebuild", file=decl_file, line=cpp.line_of(decl_text, decl.offset),
                                         hint="return a std::tuple of Tensors, double, int64_t or bool")]
    return Op(name, function, tuple(op_args), returns, doc, file, line, return_alias), problems


def _defaults_trail(args: list[OpArg]) -> list[OpArg]:
    """A schema cannot have a parameter without a default after one with a default (Python's rule):
    defaults before the last required parameter are dropped."""
    last_required = max((i for i, a in enumerate(args) if a.default is None), default=-1)
    return [replace(a, default=None) if i < last_required else a for i, a in enumerate(args)]


def function_of(expression: str) -> str | None:
    e = " ".join(expression.split())
    wrapped = re.fullmatch(r"(?:torch::)?wrap_pybind_function\s*\((.*)\)", e)
    if wrapped:
        e = wrapped.group(1).strip()
    e = e.strip()
    while e.startswith("(") and e.endswith(")"):
        e = e[1:-1].strip()
    m = re.fullmatch(r"&?\s*((?:::)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)", e)
    return m.group(1).replace(" ", "").removeprefix("::") if m else None


def _extras(file: str, line: int, extras: list[str]) -> tuple[str | None, list[tuple[str, str | None]], int | None,
                                                               list[Finding]]:
    """(docstring, [(py::arg name, default expression)], index where keyword-only starts, findings)."""
    doc = None
    py_args: list[tuple[str, str | None]] = []
    kw_from = None
    problems: list[Finding] = []
    for extra in extras:
        e = " ".join(extra.split())
        literal = cpp.string_literal(e)
        if literal is not None and not re.match(r'"[^"]*"\s*_a\b', e):
            doc = literal
            continue
        m = re.fullmatch(r'(?:py|pybind11)::arg\s*\(\s*"(\w+)"\s*\)(?:\s*\.\s*(?:noconvert|none)\s*\([^)]*\))*(?:\s*=\s*(.+))?', e) \
            or re.fullmatch(r'"(\w+)"\s*_a(?:\s*=\s*(.+))?', e)
        if m:
            py_args.append((m.group(1), m.group(2)))
            continue
        if re.fullmatch(r"(?:py|pybind11)::kw_only\s*\(\s*\)", e):
            kw_from = len(py_args)
            continue
        if re.fullmatch(r"(?:py|pybind11)::(?:pos_only\s*\(\s*\)|call_guard<.*>\s*\(\s*\)|return_value_policy::\w+"
                        r"|keep_alive<.*>\s*\(\s*\))", e):
            continue  # how pybind11 calls the function; a torch op has its own calling convention
        problems.append(finding("PA113", f"m.def argument `{_short(e, 50)}` is not carried", file=file, line=line))
    return doc, py_args, kw_from, problems


def _declarations(function: str, lookup: Lookup) -> list[tuple[str, str, cpp.Declaration]]:
    parts = function.split("::")
    name, qualifier = parts[-1], tuple(parts[:-1])
    found = lookup(name)
    if qualifier:
        found = [f for f in found if tuple(p for p in f[2].namespace if p)[-len(qualifier):] == qualifier]
    return found


def _best(declarations: list[tuple[str, str, cpp.Declaration]]) -> tuple[str, str, cpp.Declaration]:
    """Prefer the declaration whose parameters are named (a definition, or a header with names)."""
    def named(entry) -> int:
        return sum(1 for p in entry[2].params if cpp.parse_parameter(p).name)
    return max(declarations, key=named)


# --- the port ---------------------------------------------------------------------------------

def port_binding(binding: Binding, backends: Sequence[str], defs_file: str,
                 elsewhere: Mapping[str, Collection[str]] | None = None,
                 flavours: Sequence[tuple[Binding, Sequence[str]]] = ()) -> str:
    """The binding file with its module block guarded and the op kernels registered beside it
    (registration_block: `backends`, `elsewhere`). `flavours`: the same file as another build flavour
    reads it (its cpu build without CUDA), with the backends that flavour's variants are: where that
    flavour compiles another module block (`#ifdef USE_CUDA ... #else ... #endif`), that block is ported
    the same way, registering its own functions; a module block no flavour compiles is guarded only."""
    text = binding.text
    ported: dict[int, tuple[cpp.Block, str]] = {}
    for read, scope in ((binding, backends), *flavours):
        if read.block.start not in ported:
            ported[read.block.start] = (read.block, registration_block(read.ops, scope, elsewhere))
    hidden = [b for b in binding.alternatives if b.start not in ported]
    edits = [(b.start, b.end, _ported_block(text[b.start:b.end], registration, defs_file))
             for b, registration in ported.values()]
    edits += [(b.start, b.end, f"#ifndef Py_LIMITED_API  // {MARKER}: a module of another build flavour\n"
                                f"{text[b.start:b.end]}\n{GUARD_END}\n") for b in hidden]
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:].removeprefix("\n")
    return guard_includes(text)


def _ported_block(original: str, registration: str, defs_file: str) -> str:
    return (f"#ifdef Py_LIMITED_API  // {MARKER}: kernel-builder builds (limited API, no pybind11) register the ops "
            f"declared in {defs_file}\n"
            "#include <torch/library.h>\n\n"
            '#include "registration.h"\n\n'
            f"{registration}"
            "#else\n"
            f"{original}\n"
            f"{GUARD_END}\n")


def registration_block(ops: Sequence[Op], backends: Sequence[str],
                       elsewhere: Mapping[str, Collection[str]] | None = None) -> str:
    """TORCH_LIBRARY_IMPL_EXPAND blocks registering the kernels of functions a pybind11 module bound, in the
    variants of `backends` (the source is compiled into each; several: one block per backend's macro).

    A bound function took whatever tensors its C++ accepts: maskrcnn-benchmark's nms runs its CPU or its CUDA
    code on `dets.is_cuda()`, GeoTransformer's CUDAExtension holds CPU code only. So in a variant of a GPU
    backend each is registered for the CPU key too, where the original module answered CPU tensors as well.
    `elsewhere`: dispatch key -> names of ops that another source of the same variant registers for that key
    (a CPU extension's twin compiled into the cuda variant: its kernel answers CPU tensors); those keys are
    left to it. An op without a tensor argument has no device to dispatch on: one kernel for every device."""
    dispatch = _dispatch()
    elsewhere = elsewhere or {}
    tensor_ops = [op for op in ops if _has_tensor(op)]
    other_ops = [op for op in ops if not _has_tensor(op)]
    out: list[str] = []
    keyed = [b for b in backends if b in dispatch]
    if tensor_ops:
        blocks = [_backend_blocks(dispatch, backend, tensor_ops, elsewhere) for backend in keyed]
        if len(set(blocks)) == 1:  # the same in every variant (a CPU twin's kernels, left CPU-only)
            out.append(blocks[0])
        else:
            for i, (backend, block) in enumerate(zip(keyed, blocks, strict=True)):
                out.append(f"#{'if' if i == 0 else 'elif'} defined({dispatch[backend]['macro']})\n")
                out.append(block)
            out.append("#endif\n")
    if other_ops:
        out.append(_impl_block("CompositeExplicitAutograd", other_ops))
    return "".join(out)


def _backend_blocks(dispatch: dict, backend: str, ops: Sequence[Op], elsewhere: Mapping[str, Collection[str]]) -> str:
    """The blocks of one backend's variants: its own dispatch key, and the CPU key in a GPU backend's."""
    keys = list(dict.fromkeys([dispatch[backend]["key"], dispatch[HOST_BACKEND]["key"]]))
    blocks = []
    for key in keys:
        kept = [op for op in ops if op.name not in elsewhere.get(key, ())]
        if kept:
            blocks.append(_impl_block(key, kept))
    return "".join(blocks)


def _has_tensor(op: Op) -> bool:
    return any(a.ctype.kind == "tensor" or (a.ctype.inner and a.ctype.inner[0].kind == "tensor") for a in op.args)


def _impl_block(key: str, ops: Sequence[Op]) -> str:
    lines = [f"TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, {key}, ops) {{"]
    for op in ops:
        lines.append(f'  ops.impl("{op.name}", {_kernel(op)});')
    lines.append("}\n")
    return "\n".join(lines)


def _kernel(op: Op) -> str:
    if not op.needs_shim:
        return f"&{op.function}"
    params = ", ".join(f"{a.ctype.shim_type()} {a.name}" for a in op.args)
    # an optional tensor the function takes by non-const reference gets a local copy (its tensor is the caller's)
    prelude = "".join(f"{a.ctype.written} {a.name}_arg({a.name}); " for a in op.args if a.ctype.mutable_optional)
    call = f"{op.function}({', '.join(f'{a.name}_arg' if a.ctype.mutable_optional else a.ctype.convert(a.name) for a in op.args)})"
    r = op.returns
    if r.kind == "void":
        body = f"{call};"
    elif r.kind == "scalar" and r.via:
        body = f"return static_cast<{r.via}>({call});"
    elif r.kind == "tuple" and r.via:  # a std::pair: the dispatcher returns tuples
        body = f"auto result = {call}; return std::make_tuple(result.first, result.second);"
    elif r.kind == "list" and r.inner[0].needs_shim:
        body = f"auto result = {call}; return std::vector<{r.inner[0].via}>(result.begin(), result.end());"
    else:
        body = f"return {call};"
    # a shim: the dispatcher takes double and int64_t, the function wants float or int
    return f"[]({params}) {{ {prelude}{body} }}"


def guard_includes(text: str) -> str:
    """pybind11 headers (and torch/extension.h, which includes them) only where pybind11 compiles:
    consecutive include lines are guarded together; `namespace py = pybind11;` and `using namespace
    pybind11::literals;` likewise."""
    current = text
    masked = cpp.mask(current)
    spans: list[tuple[int, int]] = []
    # `#include "torch/extension.h"`: the quoted name is a string literal the mask blanks
    for pattern, searched in ((_PYBIND_INCLUDE, cpp.mask(current, strings=False)), (_PY_ALIAS, masked)):
        for m in pattern.finditer(searched):
            if not _inside_guard(current, m.start()) and _depth(masked, m.start()) == 0:
                spans.append((m.start(), m.end()))
    if not spans:
        return current
    spans.sort()
    groups: list[list[tuple[int, int]]] = []
    for span in spans:
        if groups and current[groups[-1][-1][1]:span[0]].strip() == "":
            groups[-1].append(span)
        else:
            groups.append([span])
    out: list[str] = []
    at = 0
    for group in groups:
        start, end = group[0][0], group[-1][1]
        lines = current[start:end]
        if not lines.endswith("\n"):
            lines += "\n"
        torch_header = re.search(r"torch/(extension|python)\.h", lines)
        out.append(current[at:start])
        if torch_header:
            out.append(f"#ifdef Py_LIMITED_API  // {MARKER}: pybind11 does not compile against the limited API\n"
                       "#include <torch/all.h>\n#else\n" + lines + GUARD_END + "\n")
        else:
            out.append(f"#ifndef Py_LIMITED_API  // {MARKER}: pybind11 does not compile against the limited API\n"
                       + lines + GUARD_END + "\n")
        at = end
    out.append(current[at:])
    return "".join(out)


def _inside_guard(text: str, offset: int) -> bool:
    for pattern in (_PORTED, _HIDDEN):
        for m in pattern.finditer(text):
            if m.start() <= offset < m.end():
                return True
    return False


def _depth(masked: str, offset: int) -> int:
    """How many #if blocks enclose `offset` (an include inside one is the author's own choice);
    a header's include guard (#ifndef X followed by #define X) does not count."""
    depth = 0
    directives = list(re.finditer(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif|define)\b[ \t]*(\w*)", masked[:offset], re.M))
    for i, m in enumerate(directives):
        word, name = m.groups()
        if word == "ifndef" and i + 1 < len(directives) and directives[i + 1].groups() == ("define", name):
            continue
        if word in ("if", "ifdef", "ifndef"):
            depth += 1
        elif word == "endif":
            depth -= 1
    return max(depth, 0)


def needs_include_guard(text: str) -> bool:
    return guard_includes(text) != text


def defs_file_text(ops: Sequence[Op], module: str, bindings: Sequence[str], *, fragment: bool = False) -> str:
    """torch-ext/torch_binding.cpp: the schema of every op the pybind11 module(s) bound, a list of the ops the
    author registers in their own files, and the extension's Python module entry point. `fragment`: the
    author's files hold the namespace's TORCH_LIBRARY already (one per library), so these ops are a fragment."""
    bound = [op for op in ops if op.registered_by == "pybind11"]
    registered = [op for op in ops if op.registered_by != "pybind11"]
    where = ", ".join(bindings)
    lines = []
    if bound:
        lines += [
            f"// Written by {MARKER} from the pybind11 module `{module}` ({where}).",
            "// Each op's schema comes from the C++ signature of the function the module bound; the",
            f"// kernels are registered beside the module, in {where} (TORCH_LIBRARY_IMPL_EXPAND).",
        ]
    else:
        lines.append(f"// Written by {MARKER} for the extension `{module}`: its Python module entry point.")
    if registered:
        files = sorted({op.file for op in registered})
        lines += [f"// The ops {', '.join(sorted({op.name for op in registered}))} are registered where the author "
                  f"registers them ({', '.join(files)}),", "// under the kernel's own namespace."]
    lines.append("// Rerun `publisher adopt` after changing what the module binds or registers.")
    if bound:
        lines += ["#include <torch/library.h>", ""]
    lines += ['#include "registration.h"', ""]
    if bound:
        head = "TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME, ops) {" if fragment else \
            "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {"
        lines.append(head)
        for op in bound:
            note = f"  // {op.file}:{op.line}" + (f": {_short(op.doc, 80)}" if op.doc else "")
            lines.append(note)
            lines.append(f'  ops.def("{_escape(op.schema())}");')
        lines += ["}", ""]
    lines += ["REGISTER_EXTENSION(TORCH_EXTENSION_NAME)", ""]
    return "\n".join(lines)


def _escape(schema: str) -> str:
    return schema.replace("\\", "\\\\").replace('"', '\\"')
