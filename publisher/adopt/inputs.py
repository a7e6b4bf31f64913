"""Inputs for adopt's generated tests from the project itself: every place its
Python code (its tests and examples, README code blocks, its package and
wrappers) calls an op of the former extension module, read statically. At
the call, each argument is followed back (assignments in the same function,
then the callers of that function, two levels up) to what made it: a cast
(`idx.long()`, `.int()`, `.to(torch.int32)`), a constructor with sizes and a
dtype (`torch.zeros(B, n, dtype=torch.int32)`, `src.new_zeros(...)`), a
literal. Sizes stay symbolic (`out = torch.zeros(offsets.numel() - 1,
src.size(1))` is "one less than the elements of `offsets`, the columns of
`src`") until every argument of the call is known, so related shapes agree.

The call with the most known is the op's `Derived`; `tests_gen` writes it as
the op's INPUTS line, with where it came from. What the project does not say
is filled in the same way for every op (resources/adopt_inputs.yaml): every
unknown dimension the same size, integer tensors zero (a valid index, an
empty segment). Nothing here runs the author's code."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath

from publisher.adopt import expects, sources
from publisher.adopt.model import Op, written_by_adopt
from publisher.data import read_yaml

MAX_CALLER_DEPTH = 2  # op call <- the wrapper that makes it <- a test or example that calls the wrapper
MAX_CALLERS = 24  # callers of one function looked at
MAX_FOLLOWED = 150  # expressions followed back at once (a chain of reassignments ends there, well short of recursion limits)
_INTEGER = ("int", "uint", "bool")  # dtypes whose guessed tensors are zeros (a valid index, an empty segment)


@cache
def _facts() -> dict:
    return read_yaml("adopt_inputs.yaml")


def facts() -> dict:
    """resources/adopt_inputs.yaml: what generated inputs are made of where the project says nothing."""
    return _facts()


# --- what is known of a value --------------------------------------------------------------------

# A size, symbolic until the call's arguments are all known:
#   ("lit", n) | ("size", origin, i) | ("numel", origin) | ("int", origin) | ("bin", op, a, b)
#   | ("sym", key): a size a docstring names; None: unknown
Size = tuple | None


@dataclass(frozen=True)
class TensorSpec:
    """What the project says of a tensor argument; None where it says nothing."""

    dtype: str | None = None  # canonical name: int64, float32, complex64 ...
    shape: tuple[Size, ...] | None = None  # None: rank unknown
    origin: object = None  # what made it (a constructor node, an unbound parameter): shared by casts of it
    like: object = None  # the origin (later: the op argument) whose shape it has, where that is all that is known
    device: str | None = None  # "cpu" where the op checks for a CPU tensor; None: the device of the variant


@dataclass(frozen=True)
class Derived:
    """An op's arguments as one call in the project makes them."""

    site: str  # "the call at pkg/mod.py:12", "the call at tests/test_x.py:8 through pkg/mod.py:12", "the checks in x.cpp:3"
    tensors: dict[str, TensorSpec] = field(default_factory=dict)  # op argument -> spec
    scalars: dict[str, object] = field(default_factory=dict)  # op argument -> a literal value
    sizes: dict[str, Size] = field(default_factory=dict)  # int op argument -> a symbolic size (unresolved)

    @property
    def known(self) -> int:
        score = len(self.scalars) + len(self.sizes)
        for spec in self.tensors.values():
            score += (spec.dtype is not None) + (spec.shape is not None) * 2
            score += sum(1 for d in spec.shape or () if d is not None)
        return score


# --- the project's Python, as parsed files ----------------------------------------------------------

@dataclass(frozen=True)
class _File:
    rel: str
    tree: ast.Module
    line_offset: int = 0  # a README block: the line of the fence
    kind: int = 3  # 0 tests, 1 README, 2 examples and scripts, 3 the package and wrappers (preference order)

    def where(self, node: ast.AST) -> str:
        return f"{self.rel}:{getattr(node, 'lineno', 0) + self.line_offset}"


def _kind(rel: str) -> int:
    parts = PurePosixPath(rel).parts
    name = parts[-1]
    if any(p in ("test", "tests", "testing") for p in parts[:-1]) or name.startswith("test") or name.endswith("_test.py"):
        return 0
    if any(p in ("examples", "example", "benchmarks", "benchmark", "scripts", "demo", "demos") for p in parts[:-1]):
        return 2
    return 3


def project_files(root: Path) -> list[_File]:
    """The project's Python files and README code blocks, parsed; setup.py and the files adopt wrote left out."""
    out: list[_File] = []
    for rel in sources.walk(root, (".py",)):
        text = sources.read_text(root / rel)
        if rel == "setup.py" or text is None or written_by_adopt(text):
            continue
        tree = _parse(text)
        if tree is not None:
            out.append(_File(rel, tree, 0, _kind(rel)))
    for name in _facts()["readme_names"]:
        text = sources.read_text(root / name)
        if text is None:
            continue
        for line, block in _code_blocks(text):
            tree = _parse(block)
            if tree is not None:
                out.append(_File(name, tree, line, 1))
    return out


_FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)[^\n]*\n(.*?)^\1```", re.M | re.S)


def _code_blocks(text: str) -> Iterator[tuple[int, str]]:
    fences = set(_facts()["code_fences"])
    for m in _FENCE.finditer(text):
        if m.group(2).lower() not in fences:
            continue
        body = m.group(3)
        if re.search(r"^\s*>>> ", body, re.M):  # a session: its statements, not its output
            body = "\n".join(re.sub(r"^\s*(>>>|\.\.\.) ?", "", ln) if re.match(r"^\s*(>>>|\.\.\.)", ln) else ""
                             for ln in body.splitlines())
        yield text.count("\n", 0, m.start(3)), _dedent(body)


def _dedent(body: str) -> str:
    lines = body.splitlines()
    indents = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(ln[cut:] for ln in lines)


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


# --- scopes: where a name got its value -------------------------------------------------------------

@dataclass
class _Scope:
    file: _File
    node: ast.AST  # a FunctionDef or the Module
    params: tuple[str, ...]
    assigns: dict[str, list[tuple[int, ast.AST, int | None]]]  # name -> (line, value, unpacked index)
    cls: ast.ClassDef | None = None
    module: _Scope | None = None  # the file's module scope (for a function)


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function (or module) body, not those of functions and classes defined in it."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(child))


def _make_scope(file: _File, node: ast.AST, cls: ast.ClassDef | None = None, module: _Scope | None = None) -> _Scope:
    params: tuple[str, ...] = ()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = node.args
        params = tuple(p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs])
    assigns: dict[str, list[tuple[int, ast.AST, int | None]]] = {}
    for child in _own_nodes(node):
        targets: list[ast.AST] = []
        value = None
        if isinstance(child, ast.Assign):
            targets, value = child.targets, child.value
        elif isinstance(child, (ast.AnnAssign, ast.NamedExpr)) and child.value is not None:
            targets, value = [child.target], child.value
        elif isinstance(child, (ast.For, ast.comprehension)):
            targets, value = [child.target], None
        for target in targets:
            line = getattr(child, "lineno", None) or getattr(target, "lineno", 0)  # a comprehension has none
            if isinstance(target, ast.Name):
                assigns.setdefault(target.id, []).append((line, value, None))
            elif isinstance(target, (ast.Tuple, ast.List)):
                for index, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Starred):
                        break
                    if isinstance(elt, ast.Name):
                        assigns.setdefault(elt.id, []).append((line, value, index))
    for entries in assigns.values():
        entries.sort(key=lambda e: e[0])
    return _Scope(file, node, params, assigns, cls, module)


@dataclass
class _Ctx:
    """Evaluation at a line of a scope, with the scope's parameters bound to a caller's arguments."""

    scope: _Scope
    line: int
    bound: dict[str, tuple[ast.AST, _Ctx]] = field(default_factory=dict)
    depth: int = 0


def _dtype_name(node: ast.AST) -> str | None:
    """`torch.int64`, `torch.long`, "int64" -> the canonical dtype name."""
    dtypes = _facts()["dtypes"]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return dtypes.get(node.attr)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return dtypes.get(node.value.removeprefix("torch."))
    return None


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Evaluator:
    """Follows expressions back to what made them (see the module docstring)."""

    def __init__(self):
        self.specs: dict[object, TensorSpec] = {}  # origin -> what is known of it (for sizes of other tensors)
        self._guard: set[tuple[int, int]] = set()

    # names

    def _lookup(self, name: str, ctx: _Ctx) -> tuple[ast.AST, _Ctx, int | None] | tuple[None, object, None]:
        """(value, its context, unpacked index) of the name's last assignment before the line; else a caller's
        argument for a parameter; else (None, origin of the unbound name, None)."""
        entries = [e for e in ctx.scope.assigns.get(name, ()) if e[0] < ctx.line]
        if entries:
            line, value, index = entries[-1]
            if value is None:
                return None, ("loop", id(ctx.scope.node), name), None
            return value, _Ctx(ctx.scope, line, ctx.bound, ctx.depth), index
        if name in ctx.bound:
            expr, caller = ctx.bound[name]
            return expr, caller, None
        gradient = _gradient_of(ctx.scope, name)
        if gradient is not None:
            return gradient
        default = _default_of(ctx.scope, name)
        if default is not None:  # `def knn(ref, query, k=1)` called without k: 1
            return default, _Ctx(ctx.scope, ctx.scope.node.lineno, {}, ctx.depth), None
        module = ctx.scope.module
        if module is not None and name not in ctx.scope.params and module.assigns.get(name):
            line, value, index = module.assigns[name][-1]  # a module-level constant (N = 1024)
            if value is not None:
                return value, _Ctx(module, line + 1), index
        return None, ("name", id(ctx.scope.node), name), None

    # tensors

    def tensor(self, expr: ast.AST, ctx: _Ctx) -> TensorSpec:
        key = (id(expr), id(ctx))
        if key in self._guard or len(self._guard) > MAX_FOLLOWED:
            return TensorSpec(origin=("cycle", id(expr)))
        self._guard.add(key)
        try:
            spec = self._tensor(expr, ctx)
        finally:
            self._guard.discard(key)
        if spec.origin is not None:
            known = self.specs.get(spec.origin)
            if known is None or (known.shape is None and spec.shape is not None):
                self.specs[spec.origin] = spec
        return spec

    def _tensor(self, expr: ast.AST, ctx: _Ctx) -> TensorSpec:
        facts = _facts()
        if isinstance(expr, ast.Name):
            value, where, index = self._lookup(expr.id, ctx)
            if value is None:
                return TensorSpec(None, _declared_shape(ctx.scope, expr.id), where)
            if index is not None:
                saved = _saved(value, index, ctx.scope)
                if saved is not None:
                    return self.tensor(*saved)
                return TensorSpec(origin=("unpacked", id(value), index))
            spec = self.tensor(value, where)
            if spec.shape is None and spec.like is None and expr.id in ctx.scope.params \
                    and not any(e[0] < ctx.line for e in ctx.scope.assigns.get(expr.id, ())):
                # a caller's value the callee says more of (`B, N, C = xyz.size()`, `assert C == 3`)
                spec = TensorSpec(spec.dtype, _declared_shape(ctx.scope, expr.id), spec.origin)
            return spec
        if isinstance(expr, ast.Starred):
            return TensorSpec(origin=("starred", id(expr)))
        if not isinstance(expr, ast.Call):
            return TensorSpec(origin=("expr", id(expr)))
        func = expr.func
        name = _dotted(func) or ""
        if isinstance(func, ast.Attribute) and not name.startswith("torch."):
            method, base = func.attr, func.value
            if method in facts["casts"]:
                inner = self.tensor(base, ctx)
                return TensorSpec(facts["casts"][method], inner.shape, inner.origin)
            if method in ("to", "type"):
                inner = self.tensor(base, ctx)
                dtype = next((d for d in (self.dtype(a, ctx) for a in [*expr.args, *(k.value for k in expr.keywords)])
                              if d), None)
                if dtype is None and method == "type" and expr.args:
                    typed = (_dotted(expr.args[0]) or "").rpartition(".")[2]
                    dtype = facts["typed"].get(typed)
                return TensorSpec(dtype or inner.dtype, inner.shape, inner.origin)
            if method in facts["preserving"]:
                inner = self.tensor(base, ctx)
                return TensorSpec(inner.dtype, inner.shape, inner.origin)
            if method in ("view", "reshape", "expand"):
                inner = self.tensor(base, ctx)
                return self._sized(inner.dtype, expr.args, ctx, ("expr", id(expr)))
            if method in facts["new_sized"]:
                inner = self.tensor(base, ctx)
                dtype = self.dtype(_kw(expr, "dtype"), ctx) or inner.dtype
                size_args = expr.args if method != "new_full" else expr.args[:-1]
                return self._sized(dtype, size_args, ctx, ("expr", id(expr)))
            if method in facts["reshaping"]:
                inner = self.tensor(base, ctx)
                return TensorSpec(inner.dtype, None, ("expr", id(expr)))
            return TensorSpec(origin=("expr", id(expr)))
        leaf = name.rpartition(".")[2]
        dtype = self.dtype(_kw(expr, "dtype"), ctx)
        if name.startswith("torch.") and leaf in facts["sized"]:
            args = expr.args if leaf != "full" else expr.args[:1]
            if dtype is None and leaf == "full" and len(expr.args) > 1:
                dtype = _literal_dtype(expr.args[1])
            return self._sized(dtype or "float32", args or _kw_list(expr, "size"), ctx, id(expr))
        if name.startswith("torch.") and leaf in facts["like"]:
            inner = self.tensor(expr.args[0], ctx) if expr.args else TensorSpec()
            return TensorSpec(dtype or inner.dtype, inner.shape, id(expr), None if inner.shape else inner.origin)
        if name.startswith("torch.") and leaf in facts["typed"]:
            if expr.args and not isinstance(expr.args[0], (ast.List, ast.Tuple)):
                return self._sized(facts["typed"][leaf], expr.args, ctx, id(expr))
            return TensorSpec(facts["typed"][leaf], _literal_shape(expr.args[0]) if expr.args else None, id(expr))
        if name in ("torch.tensor", "torch.as_tensor", "torch.Tensor") and expr.args:
            return TensorSpec(dtype or (_literal_dtype(expr.args[0]) if name != "torch.Tensor" else "float32"),
                              _literal_shape(expr.args[0]), id(expr))
        if name == "torch.randint":
            size = _kw(expr, "size") or next((a for a in expr.args if isinstance(a, (ast.Tuple, ast.List))), None)
            return self._sized(dtype or "int64", [size] if size is not None else [], ctx, id(expr))
        if name == "torch.arange":
            bounds = [_int_literal(a) for a in expr.args]
            length = None
            if bounds and all(b is not None for b in bounds):
                start, end, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds[:2], bounds[2] if len(bounds) > 2 else 1)
                length = ("lit", max(0, math.ceil((end - start) / step))) if step else None
            elif len(expr.args) == 1:
                length = self.size(expr.args[0], ctx)
            floats = any(isinstance(a, ast.Constant) and isinstance(a.value, float) for a in expr.args)
            return TensorSpec(dtype or ("float32" if floats else "int64"), (length,), id(expr))
        if name == "torch.view_as_complex" and expr.args:
            inner = self.tensor(expr.args[0], ctx)
            return TensorSpec("complex128" if inner.dtype == "float64" else "complex64",
                              inner.shape[:-1] if inner.shape else None, id(expr))
        if name == "torch.complex" and expr.args:
            inner = self.tensor(expr.args[0], ctx)
            return TensorSpec("complex128" if inner.dtype == "float64" else "complex64", inner.shape, id(expr))
        if name.startswith("torch.fft."):
            return TensorSpec(None if leaf.startswith(("irfft", "hfft")) else "complex64", None, id(expr))
        return TensorSpec(origin=("expr", id(expr)))

    def dtype(self, node: ast.AST | None, ctx: _Ctx) -> str | None:
        """A dtype argument: `torch.int32`, "int64", `src.dtype`."""
        if node is None:
            return None
        if isinstance(node, ast.Attribute) and node.attr == "dtype":
            return self.tensor(node.value, ctx).dtype
        return _dtype_name(node)

    # sizes

    def _sized(self, dtype: str | None, args: Sequence[ast.AST], ctx: _Ctx, origin: object) -> TensorSpec:
        """A tensor made from size arguments: `B, n`, `(B, n)`, `[B, n]`, `x.size()`, `x.shape`."""
        if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
            args = args[0].elts
        if len(args) == 1:
            target = _whole_shape_of(args[0])
            if target is not None:
                spec = self.tensor(target, ctx)
                return TensorSpec(dtype, spec.shape, origin, None if spec.shape is not None else spec.origin)
        if not args or any(isinstance(a, ast.Starred) for a in args):
            return TensorSpec(dtype, None, origin)
        return TensorSpec(dtype, tuple(self.size(a, ctx) for a in args), origin)

    def size(self, node: ast.AST, ctx: _Ctx) -> Size:
        """An int expression as a symbolic size."""
        key = (id(node), id(ctx))
        if key in self._guard or len(self._guard) > MAX_FOLLOWED:
            return None
        self._guard.add(key)
        try:
            return self._size(node, ctx)
        finally:
            self._guard.discard(key)

    def _size(self, node: ast.AST, ctx: _Ctx) -> Size:
        literal = _int_literal(node)
        if literal is not None:
            return ("lit", literal)
        if isinstance(node, ast.Name):
            value, where, index = self._lookup(node.id, ctx)
            if value is None:
                return ("int", where)
            if index is not None:
                return self._unpacked_size(value, index, where)
            return self.size(value, where)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            left, right = self.size(node.left, ctx), self.size(node.right, ctx)
            if left is None or right is None:
                return None
            return ("bin", type(node.op).__name__, left, right)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "size" and len(node.args) == 1:
                index = _int_literal(node.args[0])
                return self._dim_of(node.func.value, index, ctx) if index is not None else None
            if node.func.attr in ("numel", "nelement"):
                return ("numel", self.tensor(node.func.value, ctx).origin)
            if node.func.attr == "item":
                return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and node.args:
            return self.size(node.args[0], ctx)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args:
            return self._dim_of(node.args[0], 0, ctx)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            index = _int_literal(node.slice)
            return self._dim_of(node.value.value, index, ctx) if index is not None else None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "size":
            index = _int_literal(node.slice)
            return self._dim_of(node.value.func.value, index, ctx) if index is not None else None
        return None

    def _unpacked_size(self, value: ast.AST, index: int, ctx: _Ctx) -> Size:
        """`B, N, _ = xyz.size()` / `= xyz.shape`: B is dim 0 of xyz (which is then 3-d)."""
        target = None
        if isinstance(value, ast.Attribute) and value.attr == "shape":
            target = value.value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size" \
                and not value.args:
            target = value.func.value
        elif isinstance(value, ast.Subscript) and isinstance(value.value, ast.Attribute) and value.value.attr == "shape":
            target = value.value.value
            lower = value.slice.lower if isinstance(value.slice, ast.Slice) else None
            index += _int_literal(lower) or 0 if lower is not None else 0
        elif isinstance(value, (ast.Tuple, ast.List)) and index < len(value.elts):
            return self.size(value.elts[index], ctx)
        if target is None:
            return None
        return self._dim_of(target, index, ctx)

    def _dim_of(self, tensor: ast.AST, index: int, ctx: _Ctx) -> Size:
        spec = self.tensor(tensor, ctx)
        if spec.shape is not None and -len(spec.shape) <= index < len(spec.shape) and spec.shape[index] is not None:
            return spec.shape[index]
        if spec.like is not None:
            return ("size", spec.like, index)
        return ("size", spec.origin, index)

    def scalar(self, node: ast.AST, ctx: _Ctx) -> object:
        """A literal the call passes for a scalar argument (followed through names), or None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.scalar(node.operand, ctx)
            return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else None
        if isinstance(node, ast.Name):
            value, where, index = self._lookup(node.id, ctx)
            if value is not None and index is None:
                return self.scalar(value, where)
        return None


def _whole_shape_of(node: ast.AST) -> ast.AST | None:
    """`x.size()`, `x.shape` -> x."""
    if isinstance(node, ast.Attribute) and node.attr == "shape":
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and not node.args:
        return node.func.value
    return None


def _is_autograd(cls: ast.ClassDef | None) -> bool:
    return cls is not None and any((_dotted(b) or "").rpartition(".")[2] == "Function" for b in cls.bases)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _forward_scope(scope: _Scope) -> _Scope | None:
    """The forward of the autograd Function whose backward `scope` is."""
    if not _is_autograd(scope.cls) or getattr(scope.node, "name", None) != "backward":
        return None
    forward = _method(scope.cls, "forward")
    return _make_scope(scope.file, forward, scope.cls, scope.module) if forward is not None else None


def _saved(value: ast.AST, index: int, scope: _Scope) -> tuple[ast.AST, _Ctx] | None:
    """`a, b = ctx.saved_tensors` in a backward: what its forward passed to ctx.save_for_backward, there."""
    if not (isinstance(value, ast.Attribute) and value.attr in ("saved_tensors", "saved_variables")):
        return None
    forward = _forward_scope(scope)
    if forward is None:
        return None
    for node in _own_nodes(forward.node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "save_for_backward" and index < len(node.args) \
                and not any(isinstance(a, ast.Starred) for a in node.args[:index + 1]):
            return node.args[index], _Ctx(forward, node.lineno)
    return None


def _default_of(scope: _Scope, name: str) -> ast.AST | None:
    """The default value of the scope function's parameter `name`, when it has one."""
    node = scope.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    defaults = dict(zip([p.arg for p in positional[len(positional) - len(a.defaults):]], a.defaults, strict=True))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None})
    value = defaults.get(name)
    return None if isinstance(value, ast.Constant) and value.value is None else value


def _gradient_of(scope: _Scope, name: str) -> tuple[ast.AST, _Ctx, None] | None:
    """A backward's gradient parameter: shaped like the output of its forward in the same position (autograd
    passes one gradient per output), as a float tensor."""
    forward = _forward_scope(scope)
    if forward is None or name not in scope.params[1:]:
        return None
    position = scope.params.index(name) - 1
    for node in _own_nodes(forward.node):
        if isinstance(node, ast.Return) and node.value is not None:
            outputs = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if position < len(outputs) and not isinstance(outputs[position], ast.Starred):
                grad = ast.Call(ast.Attribute(outputs[position], "float", ast.Load()), [], [])
                ast.copy_location(grad, node)
                return grad, _Ctx(forward, node.lineno), None
    return None


def _shape_target(node: ast.AST) -> str | None:
    """`x.size()`, `x.shape` -> "x"."""
    if isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name):
        return node.value.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and not node.args and isinstance(node.func.value, ast.Name):
        return node.func.value.id
    return None


def _declared_shape(scope: _Scope, name: str) -> tuple[Size, ...] | None:
    """What the function says of its parameter `name`'s shape: `B, N, C = name.size()` (3-d), and the checks
    it makes (`assert C == 3`, `assert name.dim() == 2`, `if name.size(1) != 3: raise ...`)."""
    rank, dims = None, {}
    for node in _own_nodes(scope.node):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], (ast.Tuple, ast.List)) \
                and _shape_target(node.value) == name and not any(isinstance(e, ast.Starred) for e in node.targets[0].elts):
            rank = len(node.targets[0].elts)
        tests = []
        if isinstance(node, ast.Assert):
            tests = [(node.test, ast.Eq)]
        elif isinstance(node, ast.If) and node.body and isinstance(node.body[0], ast.Raise):
            tests = [(node.test, ast.NotEq)]
        for test, wanted in tests:
            for compare in ast.walk(test):
                if not (isinstance(compare, ast.Compare) and len(compare.ops) == 1 and isinstance(compare.ops[0], wanted)):
                    continue
                for side, other in ((compare.left, compare.comparators[0]), (compare.comparators[0], compare.left)):
                    value = _int_literal(other)
                    if value is None:
                        continue
                    what = _checked(side, name, scope, node.lineno)
                    if what == "rank":
                        rank = value
                    elif isinstance(what, int):
                        dims[what] = value
    if rank is None and dims and min(dims) >= 0:
        rank = max(dims) + 1
    if rank is None:
        return _documented_shape(scope, name)
    return tuple(("lit", dims[i]) if i in dims else ("lit", dims[i - rank]) if i - rank in dims else None
                 for i in range(rank))


_DOC_SHAPE = r"\(\s*((?:[A-Za-z_]\w*|\d+)(?:\s*[,x×]\s*(?:[A-Za-z_]\w*|\d+))*)\s*,?\s*\)"


def _documented_shape(scope: _Scope, name: str) -> tuple[Size, ...] | None:
    """The shape the function's docstring gives its parameter (numpydoc `xyz : torch.Tensor` then `(B, N, 3)
    tensor ...`, or `xyz: (B, N, 3) ...`): literal sizes kept, each named one the same size wherever the
    docstring uses the name."""
    doc = ast.get_docstring(scope.node) if isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if not doc:
        return None
    n = re.escape(name)
    m = (re.search(rf"^\s*{n}\s*(?:\([^)\n]*\))?\s*:[^\n]*?{_DOC_SHAPE}", doc, re.M)
         or re.search(rf"^\s*{n}\s*:[^\n]*\n\s*{_DOC_SHAPE}", doc, re.M))
    if m is None:
        return None
    dims = [d.strip() for d in re.split(r"[,x×]", m.group(1)) if d.strip()]
    return tuple(("lit", int(d)) if d.isdigit() else ("sym", (id(scope.node), d)) for d in dims)


def _checked(node: ast.AST, name: str, scope: _Scope, line: int) -> str | int | None:
    """What of tensor `name` an expression in a check is: "rank", a dimension's index, or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == name:
        if node.func.attr in ("dim", "ndimension") and not node.args:
            return "rank"
        if node.func.attr == "size" and len(node.args) == 1:
            return _int_literal(node.args[0])
    if isinstance(node, ast.Attribute) and node.attr == "ndim" and isinstance(node.value, ast.Name) \
            and node.value.id == name:
        return "rank"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args \
            and _shape_target(node.args[0]) == name:
        return "rank"
    if isinstance(node, ast.Subscript) and _shape_target(node.value) == name:
        return _int_literal(node.slice)
    if isinstance(node, ast.Name):
        entries = [e for e in scope.assigns.get(node.id, ()) if e[0] <= line]
        if entries and entries[-1][2] is not None and entries[-1][1] is not None \
                and _shape_target(entries[-1][1]) == name:
            return entries[-1][2]
    return None


def _kw_list(call: ast.Call, name: str) -> list[ast.AST]:
    value = _kw(call, name)
    return [value] if value is not None else []


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_literal(node.operand)
        return -inner if inner is not None else None
    return None


def _literal_shape(node: ast.AST) -> tuple[Size, ...] | None:
    shape: list[Size] = []
    while isinstance(node, (ast.List, ast.Tuple)):
        shape.append(("lit", len(node.elts)))
        if not node.elts:
            break
        node = node.elts[0]
    return tuple(shape) if shape else (() if isinstance(node, ast.Constant) else None)


def _literal_dtype(node: ast.AST) -> str | None:
    while isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        node = node.elts[0]
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    if isinstance(node, ast.Constant):
        value = node.value
        return ("bool" if isinstance(value, bool) else "int64" if isinstance(value, int)
                else "float32" if isinstance(value, float) else "complex64" if isinstance(value, complex) else None)
    return None


# --- finding the calls ---------------------------------------------------------------------------------

def _aliases(tree: ast.Module, modules: Sequence[str], ops: set[str]) -> tuple[set[str], dict[str, str]]:
    """(names bound to an extension module in this file, bare names bound to one of its functions)."""
    leaves = {m.rpartition(".")[2] for m in modules}
    full = set(modules)
    names: set[str] = set()
    functions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in full:
                    names.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                bound = alias.asname or alias.name
                if (f"{module}.{alias.name}" in full or (node.level and alias.name in leaves)
                        or (alias.name == "ops" and module.rpartition(".")[2] == "_ops")):
                    names.add(bound)
                elif (module in full or (node.level and module.rpartition(".")[2] in leaves)) and alias.name in ops:
                    functions[bound] = alias.name
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            func = (_dotted(node.value.func) or "").rpartition(".")[2]
            if func in ("load", "load_inline", "import_module"):  # `ext = importlib.import_module("pkg.ext")`
                given = _kw(node.value, "name") or (node.value.args[0] if node.value.args else None)
                if isinstance(given, ast.Constant) and given.value in full:
                    names.add(node.targets[0].id)
    return names, functions


def _op_of(call: ast.Call, names: set[str], functions: dict[str, str], modules: Sequence[str],
           ops: set[str]) -> str | None:
    """The op a call calls, when its receiver is the extension module (`_C.op(...)`, `pkg._C.op(...)`,
    `torch.ops.ns.op(...)`, a function imported from it)."""
    func = call.func
    if isinstance(func, ast.Name):
        return functions.get(func.id)
    if not isinstance(func, ast.Attribute) or func.attr not in ops:
        return None
    receiver = _dotted(func.value)
    if receiver is None:
        return None
    if receiver in names or receiver in modules or receiver.split(".")[0] in names and "." not in receiver:
        return func.attr
    if receiver.startswith("torch.ops.") and receiver.count(".") == 2:
        return func.attr
    return None


@dataclass(frozen=True)
class _Function:
    file: _File
    node: ast.FunctionDef
    cls: ast.ClassDef | None
    shift: int  # parameters a caller does not pass (self, ctx)


def _functions(files: Sequence[_File]) -> dict[str, list[_Function]]:
    """Callable name -> its definitions: functions by name; autograd Functions' forward by `Class.apply`."""
    out: dict[str, list[_Function]] = {}
    for file in files:
        for node in file.tree.body:
            if isinstance(node, ast.FunctionDef):
                out.setdefault(node.name, []).append(_Function(file, node, None, 0))
            elif isinstance(node, ast.ClassDef):
                autograd = any((_dotted(b) or "").rpartition(".")[2] == "Function" for b in node.bases)
                for item in node.body:
                    if not isinstance(item, ast.FunctionDef):
                        continue
                    static = any(_dotted(d) == "staticmethod" for d in item.decorator_list)
                    if autograd and item.name == "forward":
                        out.setdefault(f"{node.name}.apply", []).append(_Function(file, item, node, 1))
                    elif item.name != "forward" and not item.name.startswith("_"):
                        out.setdefault(item.name, []).append(_Function(file, item, node, 0 if static else 1))
        for node in file.tree.body:  # `gather = Gather.apply`: the Function's forward by another name
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target = (_dotted(node.value) or "").split(".")
                if len(target) >= 2 and target[-1] == "apply":
                    applied = [d for d in out.get(f"{target[-2]}.apply", ()) if d.file is file]
                    out.setdefault(node.targets[0].id, []).extend(applied)
    return out


def _callee_names(call: ast.Call, file: _File) -> list[str]:
    """Names a call may reach a project function by: `f(...)`, `mod.f(...)`, `Cls.apply(...)`, and an alias
    assigned at module level (`gather = Gather.apply`)."""
    func = call.func
    names = []
    if isinstance(func, ast.Name):
        names.append(func.id)
        for node in file.tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == func.id for t in node.targets):
                target = _dotted(node.value)
                if target and target.endswith(".apply"):
                    names.append(".".join(target.split(".")[-2:]))
    elif isinstance(func, ast.Attribute):
        dotted = _dotted(func) or ""
        names.append(".".join(dotted.split(".")[-2:]) if func.attr == "apply" else func.attr)
    return names


def _module_name(rel: str) -> str:
    parts = list(PurePosixPath(rel).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _may_reach(call: ast.Call, file: _File, definition: _Function) -> bool:
    """Whether a call by name may reach the definition, as far as the caller's absolute imports tell: a name
    imported from another module (`from pkg.functions import f`), or called on one (`pkg.f(...)`), does not."""
    func = call.func
    bound = func.id if isinstance(func, ast.Name) else (_dotted(func.value) or "").split(".")[0] \
        if isinstance(func, ast.Attribute) else None
    if bound is None:
        return True
    target = _module_name(definition.file.rel)
    if definition.file.rel == file.rel:
        return True
    for node in ast.walk(file.tree):
        module = None
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == bound:
                    module = node.module if isinstance(func, ast.Name) else f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == bound:
                    module = alias.name if alias.asname or isinstance(func, ast.Name) else (_dotted(func.value) or "")
        if module is not None:
            return target == module or target.endswith("." + module)
    return True


def _scopes_with_calls(file: _File) -> Iterator[tuple[_Scope, ast.Call]]:
    module = _make_scope(file, file.tree)

    def visit(node: ast.AST, cls: ast.ClassDef | None) -> Iterator[tuple[_Scope, ast.Call]]:
        scope = module if node is file.tree else _make_scope(file, node, cls, module)
        for child in _own_nodes(node):
            if isinstance(child, ast.Call):
                yield scope, child
        for child in _own_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from visit(child, cls)
            elif isinstance(child, ast.ClassDef):
                for item in child.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield from visit(item, child)
    yield from visit(file.tree, None)


def _bind(params: Sequence[str], call: ast.Call, shift: int = 0) -> dict[str, ast.AST]:
    """Parameter -> the argument expression a call passes for it (positional, then keywords)."""
    bound: dict[str, ast.AST] = {}
    for name, arg in zip(params[shift:], call.args, strict=False):
        if isinstance(arg, ast.Starred):
            break
        bound[name] = arg
    for kw in call.keywords:
        if kw.arg is not None and kw.arg in params:
            bound[kw.arg] = kw.value
    return bound


# --- deriving ----------------------------------------------------------------------------------------

def derive(root: Path, ops: Sequence[Op], modules: Sequence[str],
           cpp_texts: Mapping[str, str] | None = None) -> dict[str, Derived]:
    """Op name -> the arguments the project's best call of it makes, completed with what the op's own C++
    checks (expects.py; `cpp_texts`: its sources and headers, path -> text); ops neither says anything of are
    absent. `modules`: the former extension modules' import names ("pkg._C", "lltm_cpp")."""
    derived = derive_from(project_files(root), ops, modules)
    for op in ops:
        checked = expects.expectations(op, cpp_texts or {})
        merged = _with_checks(derived.get(op.name), checked)
        if merged is not None:
            derived[op.name] = merged
    return derived


def _with_checks(found: Derived | None, checked: tuple[dict[str, expects.Expected], str] | None) -> Derived | None:
    """The project's call completed by the op's C++: the dtype it requires wins (it is what the op checks), the
    call's shapes win (they are what the project passes), the C++ rank and sizes fill what the call leaves open."""
    if not checked or not checked[0]:
        return found
    expected, where = checked
    tensors = dict(found.tensors) if found else {}
    for arg, wants in expected.items():
        spec = tensors.get(arg, TensorSpec())
        dims = {}
        rank = wants.rank if wants.rank is not None else (len(spec.shape) if spec.shape is not None else None)
        for index, size in wants.dims:
            if rank is None and index >= 0:
                rank = max(index + 1, *(i + 1 for i, _ in wants.dims if i >= 0))
            if rank is not None:
                dims[index % rank] = ("lit", size) if isinstance(size, int) else size
        shape = spec.shape
        dtype = wants.dtype or spec.dtype
        default = _facts()["integer_shape" if (dtype or "").startswith(_INTEGER) else "float_shape"]
        if shape is None and rank is None and (wants.least_rank or 0) > len(default):
            rank = wants.least_rank  # it reads more dimensions than a guess has (never fewer: a smaller tensor
            # than the guess is one more way for a kernel that trusts its inputs to read past their end)
        if shape is None and rank is not None:
            shape = tuple(dims.get(i) for i in range(rank))
        elif shape is not None:
            shape = tuple(d if d is not None else dims.get(i) for i, d in enumerate(shape))
        tensors[arg] = TensorSpec(dtype, shape, spec.origin, spec.like if shape is None else None,
                                  wants.device or spec.device)
    site = f"{found.site} and the checks in {where}" if found else f"the checks in {where}"
    return Derived(site, tensors, dict(found.scalars) if found else {}, dict(found.sizes) if found else {})


def derive_from(files: Sequence[_File], ops: Sequence[Op], modules: Sequence[str]) -> dict[str, Derived]:
    by_name = {op.name: op for op in ops}
    functions = _functions(files)
    calls_by_file = {id(f): list(_scopes_with_calls(f)) for f in files}
    best: dict[str, tuple[tuple, Derived]] = {}
    for file in files:
        names, imported = _aliases(file.tree, modules, set(by_name))
        if not names and not imported and not any("torch.ops." in (_dotted(c.func) or "")
                                                  for _, c in calls_by_file[id(file)]):
            continue
        for scope, call in calls_by_file[id(file)]:
            name = _op_of(call, names, imported, modules, set(by_name))
            if name is None:
                continue
            op = by_name[name]
            for derived in _sites(op, call, scope, files, functions, calls_by_file):
                rank = (derived.known, -file.kind)
                if name not in best or rank > best[name][0]:
                    best[name] = (rank, derived)
    return {name: derived for name, (_, derived) in best.items()}


def _sites(op: Op, call: ast.Call, scope: _Scope, files: Sequence[_File], functions: dict[str, list[_Function]],
           calls_by_file: dict[int, list]) -> Iterator[Derived]:
    """The op call as written, and as each caller of its function (up to MAX_CALLER_DEPTH) makes its arguments."""
    params = [a.name for a in op.args]
    args = _bind(params, call)
    ctx = _Ctx(scope, call.lineno)
    yield _derived(op, args, ctx, f"the call at {scope.file.where(call)}")
    frontier = [(ctx, f"the call at {scope.file.where(call)}")]
    for _ in range(MAX_CALLER_DEPTH):
        nxt = []
        for inner, label in frontier:
            for caller_ctx in _callers(inner, files, functions, calls_by_file):
                site = f"{label.replace('the call at ', f'the call at {caller_ctx[1]} through ', 1)}"
                nxt.append((caller_ctx[0], site))
                yield _derived(op, args, caller_ctx[0], site)
        frontier = nxt[:MAX_CALLERS]


def _callers(ctx: _Ctx, files: Sequence[_File], functions: dict[str, list[_Function]],
             calls_by_file: dict[int, list]) -> Iterator[tuple[_Ctx, str]]:
    """The op call's context again, its function's parameters bound to each caller's arguments.
    `ctx` is rebuilt with the deepest scope's parameters bound through the chain of callers."""
    target = _outermost_unbound(ctx)
    if target is None:
        return
    scope, chain = target
    node = scope.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    keys = [k for k, defs in functions.items() if any(d.node is node for d in defs)]
    if not keys:
        return
    definition = next(d for d in functions[keys[0]] if d.node is node)
    found = 0
    for file in files:
        for caller_scope, call in calls_by_file[id(file)]:
            if found >= MAX_CALLERS:
                return
            if caller_scope.node is node or not set(keys) & set(_callee_names(call, file)) \
                    or not _may_reach(call, file, definition):
                continue
            bound = _bind(list(scope.params), call, definition.shift)
            if not bound:
                continue
            caller = _Ctx(caller_scope, call.lineno, depth=ctx.depth + 1)
            found += 1
            yield _rebind(ctx, chain, {p: (e, caller) for p, e in bound.items()}), file.where(call)


def _outermost_unbound(ctx: _Ctx) -> tuple[_Scope, list[_Ctx]] | None:
    """The scope whose parameters no caller binds yet: the op call's own, or the last caller's."""
    chain = [ctx]
    current = ctx
    while current.bound:
        callers = {id(c): c for _, c in current.bound.values()}
        if len(callers) != 1:
            return None
        current = next(iter(callers.values()))
        chain.append(current)
    return current.scope, chain


def _rebind(ctx: _Ctx, chain: list[_Ctx], bound: dict[str, tuple[ast.AST, _Ctx]]) -> _Ctx:
    """`ctx` with the outermost context of its chain given `bound` (copies: other callers keep theirs)."""
    if len(chain) == 1:
        return _Ctx(ctx.scope, ctx.line, bound, ctx.depth)
    outer = chain[-1]
    replaced = _Ctx(outer.scope, outer.line, bound, outer.depth)
    for inner in reversed(chain[:-1]):
        replaced = _Ctx(inner.scope, inner.line, {p: (e, replaced) for p, (e, _) in inner.bound.items()}, inner.depth)
    return replaced


def _derived(op: Op, args: dict[str, ast.AST], ctx: _Ctx, site: str) -> Derived:
    evaluator = _Evaluator()
    tensors: dict[str, TensorSpec] = {}
    scalars: dict[str, object] = {}
    raw_sizes: dict[str, Size] = {}
    for arg in op.args:
        expr = args.get(arg.name)
        if expr is None:
            continue
        kind = arg.ctype.kind
        if kind == "tensor":
            tensors[arg.name] = evaluator.tensor(expr, ctx)
        elif kind == "scalar":
            value = evaluator.scalar(expr, ctx)
            if value is not None:
                scalars[arg.name] = value
            elif arg.ctype.schema == "int":
                raw_sizes[arg.name] = evaluator.size(expr, ctx)
    origins = {spec.origin: name for name, spec in tensors.items() if spec.origin is not None}
    ints = {s[1]: name for name, s in raw_sizes.items() if s is not None and s[0] == "int"}
    symbolic = {name: _relate(spec, origins, ints, evaluator.specs) for name, spec in tensors.items()}
    sizes = {}
    for name, size in raw_sizes.items():
        related = _relate_size(size, origins, ints, evaluator.specs, 0)
        if related is not None and related != ("arg", name):
            sizes[name] = related
    return Derived(site, symbolic, scalars, sizes)


def _relate(spec: TensorSpec, origins: dict, ints: dict, specs: dict) -> TensorSpec:
    """A spec whose sizes name the op's arguments (`("size", "src", 1)`) instead of the project's values."""
    shape, like = spec.shape, None
    if shape is None and spec.like is not None:
        if spec.like in origins:
            like = origins[spec.like]
        elif specs.get(spec.like) is not None:
            shape = specs[spec.like].shape
    if shape is None:
        return TensorSpec(spec.dtype, None, spec.origin, like)
    return TensorSpec(spec.dtype, tuple(_relate_size(s, origins, ints, specs, 0) for s in shape), spec.origin)


def _relate_size(size: Size, origins: dict, ints: dict, specs: dict, depth: int) -> Size:
    if size is None or depth > 8:
        return None
    kind = size[0]
    if kind in ("lit", "sym"):
        return size
    if kind == "int":
        return ("arg", ints[size[1]]) if size[1] in ints else None
    if kind in ("size", "numel"):
        origin = size[1]
        if origin in origins:
            return (kind, origins[origin], *size[2:])
        known = specs.get(origin)
        if known is not None and known.shape is not None:
            if kind == "numel":
                parts = [_relate_size(s, origins, ints, specs, depth + 1) for s in known.shape]
                return None if any(p is None for p in parts) else ("prod", tuple(parts))
            index = size[2]
            if -len(known.shape) <= index < len(known.shape):
                return _relate_size(known.shape[index], origins, ints, specs, depth + 1)
        return None
    if kind == "bin":
        left = _relate_size(size[2], origins, ints, specs, depth + 1)
        right = _relate_size(size[3], origins, ints, specs, depth + 1)
        return None if left is None or right is None else ("bin", size[1], left, right)
    return None


# --- concrete values ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Concrete:
    """A tensor argument as the generated test makes it."""

    dtype: str
    shape: tuple[int, ...]
    device: str | None = None  # None: the device of the variant under test
    value: int | None = None  # a one-element tensor holding this (the length of one batch element); None: zeros

    @property
    def integer(self) -> bool:
        """Made as zeros (a valid index, an empty segment) where a float tensor is random."""
        return self.dtype.startswith(_INTEGER)


def resolve(op: Op, derived: Derived | None) -> tuple[dict[str, Concrete], dict[str, object]]:
    """Concrete shapes and dtypes for the op's tensor arguments, and values for its scalars, from what the
    project says (`derived`), the rest filled in as resources/adopt_inputs.yaml says."""
    facts = _facts()
    derived = derived or Derived("")
    tensors = {a.name: derived.tensors.get(a.name, TensorSpec()) for a in op.args if a.ctype.kind == "tensor"}
    scalars: dict[str, object] = dict(derived.scalars)
    shapes: dict[str, tuple[int, ...]] = {}
    resolving: set[str] = set()
    named: dict[object, int] = {}  # a size a docstring names (`B`): the same wherever it is used

    def int_arg(name: str) -> int:
        value = scalars.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        scalars[name] = facts["int_value"]  # while its own size is evaluated (a cycle ends here)
        got = evaluate(derived.sizes.get(name))
        if got is not None and got >= 0:
            scalars[name] = got
        return scalars[name]

    def shape_of(name: str) -> tuple[int, ...]:
        if name in shapes:
            return shapes[name]
        spec = tensors.get(name, TensorSpec())
        if spec.shape is None and spec.like in tensors and name not in resolving:
            resolving.add(name)
            shapes[name] = shape_of(spec.like)
            resolving.discard(name)
            return shapes[name]
        if spec.shape is None or name in resolving:
            integer = (spec.dtype or "").startswith(("int", "uint", "bool"))
            shapes[name] = tuple(facts["integer_shape"] if integer else facts["float_shape"])
            return shapes[name]
        resolving.add(name)
        dims = []
        for size in spec.shape:
            value = evaluate(size)
            dims.append(value if value is not None and value >= 0 else facts["unknown_dim"])
        resolving.discard(name)
        shapes[name] = tuple(dims)
        return shapes[name]

    def evaluate(size: Size) -> int | None:
        if size is None:
            return None
        kind = size[0]
        if kind == "lit":
            return size[1]
        if kind == "sym":
            return named.setdefault(size[1], facts["unknown_dim"])
        if kind == "arg":
            return int_arg(size[1])
        if kind == "size":
            dims = shape_of(size[1])
            return dims[size[2]] if -len(dims) <= size[2] < len(dims) else None
        if kind == "numel":
            return math.prod(shape_of(size[1]))
        if kind == "prod":
            parts = [evaluate(s) for s in size[1]]
            return None if any(p is None for p in parts) else math.prod(parts)
        if kind == "bin":
            left, right = evaluate(size[2]), evaluate(size[3])
            if left is None or right is None:
                return None
            return {"Add": left + right, "Sub": left - right, "Mult": left * right,
                    "FloorDiv": left // right if right else None}[size[1]]
        return None

    for arg in op.args:
        if arg.ctype.schema == "int" and arg.ctype.kind == "scalar" and (arg.name in scalars or arg.name in derived.sizes):
            int_arg(arg.name)
    concrete = {name: Concrete(spec.dtype or "float32", shape_of(name), spec.device) for name, spec in tensors.items()}
    return _lengths(concrete), scalars


def _lengths(concrete: dict[str, Concrete]) -> dict[str, Concrete]:
    """A 1-d integer tensor named as batch lengths (resources/adopt_inputs.yaml: length_names) holds one batch
    element: every row of its tensor (the float tensor named with its prefix, else the first float tensor)."""
    pattern = re.compile(_facts()["length_names"])
    floats = [n for n, c in concrete.items() if not c.dtype.startswith(_INTEGER)]
    out = dict(concrete)
    for name, value in concrete.items():
        match = pattern.match(name)
        if not match or not value.dtype.startswith(_INTEGER) or len(value.shape) > 1 or not floats:
            continue
        prefix = match.group("prefix")
        rows = next((f for f in floats if prefix and f.startswith(prefix + "_")), floats[0])
        shape = concrete[rows].shape
        out[name] = Concrete(value.dtype, (1,), value.device, shape[0] if shape else 1)
    return out


# --- one call's arguments, as data ------------------------------------------------------------------

@dataclass(frozen=True)
class Argument:
    """One argument of a call made on derived inputs: a tensor to make, tensors, or a value.
    `kind`: tensor | tensors (a list of one float tensor) | device (the variant's) | dtype (`value` names it)
    | value (a Python literal; None for an optional left out)."""

    name: str
    kw_only: bool
    kind: str
    tensor: Concrete | None = None
    mutable: bool = False  # an output the op writes: zeros
    free_dtype: bool = False  # a float tensor whose dtype nothing in the project says
    value: object = None


# a value of each schema type where nothing in the project gives one
_GUESS = {"float": 0.5, "int": 4, "bool": False, "str": "default", "Scalar": 1.0, "int[]": [1], "float[]": [0.5],
          "bool[]": [False]}


def arguments(op: Op, derived: Derived | None) -> list[Argument]:
    """The arguments of a call of `op` on what the project says (`derived`), the rest filled in as adopt's
    generated tests fill them; it stops at the first argument with a default (the rest all have one)."""
    tensors, scalars = resolve(op, derived)
    said = derived.tensors if derived else {}
    out: list[Argument] = []
    for arg in op.args:
        if arg.default is not None:
            break
        c = arg.ctype
        if c.kind == "tensor":
            concrete = tensors[arg.name]
            spec = said.get(arg.name)
            out.append(Argument(arg.name, arg.kw_only, "tensor", concrete, c.mutable,
                                free_dtype=(spec is None or spec.dtype is None)))
        elif c.kind == "optional":
            out.append(Argument(arg.name, arg.kw_only, "value"))
        elif c.kind == "list" and c.inner[0].kind == "tensor":
            out.append(Argument(arg.name, arg.kw_only, "tensors", Concrete("float32", tuple(_facts()["float_shape"]))))
        elif c.kind == "scalar" and arg.name in scalars:
            out.append(Argument(arg.name, arg.kw_only, "value", value=scalars[arg.name]))
        elif c.kind == "scalar" and c.schema == "int" and re.match(_facts()["dim_names"], arg.name):
            out.append(Argument(arg.name, arg.kw_only, "value", value=_facts()["dim_value"]))  # the last dimension
        elif c.schema == "Device":
            out.append(Argument(arg.name, arg.kw_only, "device"))
        elif c.schema == "ScalarType":
            out.append(Argument(arg.name, arg.kw_only, "dtype", value="float32"))
        else:
            out.append(Argument(arg.name, arg.kw_only, "value", value=_GUESS.get(c.schema)))
    return out
