"""A small interpreter for build scripts (setup.py, a module calling
torch.utils.cpp_extension.load): it runs module-level statements and simple
functions over literals, names, string and list arithmetic, f-strings,
comprehensions, os.path, glob and pathlib, and records every CUDAExtension /
CppExtension / load / load_inline call and the setup() call. It never runs
the author's code: whatever it cannot follow is `Unknown`, and using an
Unknown where an extension needs it stops the evaluation with the line
(the caller then runs the script with recorders instead)."""

from __future__ import annotations

import ast
import glob as globmod
import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

MAX_STEPS = 200_000  # statements and expressions evaluated, all told
MAX_DEPTH = 12  # nested calls of the script's own functions


class NeedsExecution(Exception):
    """The script does something the interpreter does not follow, where it matters."""

    def __init__(self, reason: str, line: int | None):
        super().__init__(reason)
        self.reason = reason
        self.line = line


@dataclass(frozen=True)
class Unknown:
    reason: str
    line: int | None


@dataclass
class Call:
    """A recorded call: CUDAExtension/CppExtension/load/load_inline/setup."""

    kind: str  # cuda, cpp, load, load_inline, setup
    args: list
    kwargs: dict
    line: int
    target: str | None = None  # load(): the module-level name the result is assigned to
    assigned_line: int | None = None  # load(): the module-level statement that assigns it (maybe through a function)


@dataclass
class _Function:
    node: ast.FunctionDef
    scope: dict


class _Return(Exception):
    def __init__(self, value):
        self.value = value


_TORCH_EXT = "torch.utils.cpp_extension"
# names a script may import, and what they stand for here
_KNOWN = {
    f"{_TORCH_EXT}.CUDAExtension": "CUDAExtension", f"{_TORCH_EXT}.CppExtension": "CppExtension",
    f"{_TORCH_EXT}.BuildExtension": "BuildExtension", f"{_TORCH_EXT}.load": "load",
    f"{_TORCH_EXT}.load_inline": "load_inline", f"{_TORCH_EXT}.CUDA_HOME": "CUDA_HOME",
    f"{_TORCH_EXT}.ROCM_HOME": "ROCM_HOME", "setuptools.setup": "setup", "distutils.core.setup": "setup",
    "setuptools.find_packages": "find_packages", "setuptools.find_namespace_packages": "find_packages",
    "os.path": "os.path", "os": "os", "glob": "glob", "glob.glob": "glob.glob", "pathlib.Path": "Path",
    "os.path.join": "os.path.join", "os.path.dirname": "os.path.dirname", "os.path.abspath": "os.path.abspath",
    "sys": "sys", "setuptools": "setuptools", "torch.utils": "torch.utils", _TORCH_EXT: _TORCH_EXT,
}


@dataclass
class Evaluator:
    root: Path  # the folder the script runs in (its cwd)
    script: Path  # the script itself (its __file__)
    calls: list[Call] = field(default_factory=list)
    environ: dict[str, str] = field(default_factory=dict)  # os.environ[...] = ... the script sets
    steps: int = 0
    depth: int = 0

    # --- statements ----------------------------------------------------------------------------

    def run_module(self, tree: ast.Module) -> dict:
        scope: dict[str, Any] = {"__file__": str(self.script), "__name__": "__main__"}
        self._block(tree.body, scope)
        return scope

    def _block(self, body: list[ast.stmt], scope: dict) -> None:
        for stmt in body:
            self._stmt(stmt, scope)

    def _tick(self, node: ast.AST) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise NeedsExecution("the script does too much to follow statically", getattr(node, "lineno", None))

    def _stmt(self, stmt: ast.stmt, scope: dict) -> None:
        self._tick(stmt)
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                name = alias.asname or alias.name.split(".")[0]
                scope[name] = _Module(alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(stmt, ast.ImportFrom):
            module = stmt.module or ""
            for alias in stmt.names:
                full = f"{module}.{alias.name}"
                scope[alias.asname or alias.name] = _symbol(full)
        elif isinstance(stmt, ast.Assign):
            value = self._safe(stmt.value, scope)
            if isinstance(value, Call) and value.kind in ("load", "load_inline") and self.depth == 0 \
                    and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                value.target, value.assigned_line = stmt.targets[0].id, stmt.lineno  # `_ext = build_ext("knn")` too
            for target in stmt.targets:
                self._assign(target, value, scope, stmt)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self._assign(stmt.target, self._safe(stmt.value, scope), scope, stmt)
        elif isinstance(stmt, ast.AugAssign):
            current = self._safe(ast.Name(stmt.target.id, ast.Load()), scope) if isinstance(stmt.target, ast.Name) \
                else Unknown("augmented assignment", stmt.lineno)
            value = self._safe(stmt.value, scope)
            result = Unknown("augmented assignment", stmt.lineno)
            if not isinstance(current, Unknown) and not isinstance(value, Unknown) and isinstance(stmt.op, ast.Add):
                try:
                    result = current + value if not isinstance(current, list) else current + list(value)
                except TypeError:
                    pass
            self._assign(stmt.target, result, scope, stmt)
        elif isinstance(stmt, ast.Expr):
            result = self._safe(stmt.value, scope)
            if isinstance(result, Unknown) and isinstance(stmt.value, ast.Call):
                self._taint(stmt.value, scope, result)
        elif isinstance(stmt, ast.If):
            test = self._safe(stmt.test, scope)
            if isinstance(test, Unknown):
                self._unknown_branches(stmt, scope, test)
            else:
                self._block(stmt.body if test else stmt.orelse, scope)
        elif isinstance(stmt, ast.FunctionDef):
            scope[stmt.name] = _Function(stmt, scope)
        elif isinstance(stmt, ast.Return):
            raise _Return(self._safe(stmt.value, scope) if stmt.value is not None else None)
        elif isinstance(stmt, ast.For):
            iterable = self._safe(stmt.iter, scope)
            if isinstance(iterable, Unknown) or not _iterable(iterable):
                self._mark_assigned(stmt, scope, iterable if isinstance(iterable, Unknown) else
                                    Unknown("a loop over something unknown", stmt.lineno))
            else:
                for item in list(iterable):
                    self._assign(stmt.target, item, scope, stmt)
                    self._block(stmt.body, scope)
                self._block(stmt.orelse, scope)
        elif isinstance(stmt, ast.Try):
            self._block(stmt.body, scope)
            for handler in stmt.handlers:
                if _catches_import_error(handler):
                    # `try: import ext / except ImportError: ext = load(...)`: where the module is not installed,
                    # the handler builds it -- the extension this script declares
                    self._block(handler.body, scope)
            self._block(stmt.finalbody, scope)
        elif isinstance(stmt, ast.With):
            self._mark_assigned(stmt, scope, Unknown("set inside a with block", stmt.lineno))
            self._block(stmt.body, scope)
        elif isinstance(stmt, (ast.Pass, ast.ClassDef, ast.Assert, ast.Global, ast.Nonlocal, ast.Delete)):
            if isinstance(stmt, ast.ClassDef):
                scope[stmt.name] = Unknown(f"class {stmt.name}", stmt.lineno)
        else:
            self._mark_assigned(stmt, scope, Unknown(type(stmt).__name__, stmt.lineno))

    def _taint(self, call: ast.Call, scope: dict, why: Unknown) -> None:
        """A call made for its effect failed: the lists and dicts it was given (or called on) may now
        lack what the script put in them (`ext_modules.append(make_ext())`)."""
        names = [a for a in call.args if isinstance(a, ast.Name)]
        if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
            names.append(call.func.value)
        for name in names:
            if isinstance(scope.get(name.id), (list, dict, set)):
                scope[name.id] = why

    def _unknown_branches(self, stmt: ast.If, scope: dict, test: Unknown) -> None:
        """An `if` whose test is unknown: fine unless a branch records an extension or setup(). A test that looks a
        module up by name (`importlib.util.find_spec("ext") is None`) chooses between importing the extension
        and building it with load(): the same extension either way, so both branches are read."""
        if _looks_up_a_module(stmt.test):
            self._block(stmt.body, scope)
            self._block(stmt.orelse, scope)
            return
        for branch in (stmt.body, stmt.orelse):
            for node in ast.walk(ast.Module(body=branch, type_ignores=[])):
                if isinstance(node, ast.Call) and self._records(node, scope):
                    raise NeedsExecution(f"which extension is built depends on {test.reason}", stmt.lineno)
        self._mark_assigned(stmt, scope, Unknown(f"set under a condition ({test.reason})", stmt.lineno))

    def _records(self, call: ast.Call, scope: dict) -> bool:
        func = self._safe(call.func, scope)
        if isinstance(func, _Builtin) and func.name in ("CUDAExtension", "CppExtension", "setup", "load", "load_inline"):
            return True
        return isinstance(func, _Function)

    def _mark_assigned(self, stmt: ast.stmt, scope: dict, value: Unknown) -> None:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                scope[node.id] = value

    def _assign(self, target: ast.expr, value, scope: dict, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (tuple, list)) and len(value) == len(target.elts):
                for t, v in zip(target.elts, value, strict=True):
                    self._assign(t, v, scope, stmt)
            else:
                for t in target.elts:
                    self._assign(t, value if isinstance(value, Unknown) else Unknown("unpacking", stmt.lineno), scope, stmt)
        elif isinstance(target, ast.Subscript):
            container = self._safe(target.value, scope)
            key = self._safe(target.slice, scope)
            if isinstance(container, _Environ) and isinstance(key, str) and isinstance(value, str):
                self.environ[key] = value
            elif isinstance(container, (dict, list)) and not isinstance(key, Unknown):
                try:
                    container[key] = value
                except (TypeError, IndexError, KeyError):
                    pass
        elif isinstance(target, ast.Attribute):
            pass

    # --- expressions ---------------------------------------------------------------------------

    def _safe(self, node: ast.expr | None, scope: dict):
        """The value, or Unknown (never raises for what it cannot follow, except NeedsExecution)."""
        if node is None:
            return None
        try:
            return self.eval(node, scope)
        except _Unfollowed as err:
            return Unknown(err.reason, getattr(node, "lineno", None))

    def value(self, node: ast.expr, scope: dict):
        """The value of an expression an extension needs: NeedsExecution when unknown."""
        result = self._safe(node, scope)
        unknown = _find_unknown(result)
        if unknown is not None:
            raise NeedsExecution(unknown.reason, unknown.line or getattr(node, "lineno", None))
        return result

    def eval(self, node: ast.expr, scope: dict):
        self._tick(node)
        method = getattr(self, f"_e_{type(node).__name__}", None)
        if method is None:
            raise _Unfollowed(f"`{_source(node)}`")
        return method(node, scope)

    def _e_Constant(self, node, scope):
        return node.value

    def _e_List(self, node, scope):
        return self._items(node.elts, scope, list)

    def _e_Tuple(self, node, scope):
        return tuple(self._items(node.elts, scope, list))

    def _e_Set(self, node, scope):
        return set(self._items(node.elts, scope, list))

    def _items(self, elts, scope, kind):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                inner = self.eval(e.value, scope)
                _known(inner)
                out.extend(inner)
            else:
                out.append(self._safe(e, scope))
        return kind(out)

    def _e_Dict(self, node, scope):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                inner = self.eval(v, scope)
                _known(inner)
                out.update(inner)
            else:
                key = self.eval(k, scope)
                _known(key)
                out[key] = self._safe(v, scope)
        return out

    def _e_Name(self, node, scope):
        if node.id in scope:
            value = scope[node.id]
            if isinstance(value, Unknown):
                raise _Unfollowed(value.reason)
            return value
        if node.id in _BUILTINS:
            return _Builtin(node.id)
        raise _Unfollowed(f"the name `{node.id}`")

    def _e_Attribute(self, node, scope):
        base = self.eval(node.value, scope)
        attr = node.attr
        if isinstance(base, _Module):
            full = f"{base.name}.{attr}"
            if full == "os.environ":
                return _Environ(self)
            if full in ("os.sep",):
                return "/"
            if full == "os.name":
                return "posix"  # kernel-builder builds on Linux and macOS
            if full == "sys.platform":
                return "linux"
            return _symbol(full)
        if isinstance(base, (_Builtin,)) and base.name == "os.path" and attr == "sep":
            return "/"
        if isinstance(base, PurePath) and attr in ("parent", "name", "stem", "suffix", "parts"):
            return getattr(base, attr)
        if isinstance(base, (str, PurePath, list, dict, tuple, _Environ)):
            return _Bound(base, attr)
        raise _Unfollowed(f"`{_source(node)}`")

    def _e_Subscript(self, node, scope):
        base = self.eval(node.value, scope)
        key = self.eval(node.slice, scope)
        _known(base)
        _known(key)
        if isinstance(base, _Environ):
            if key in self.environ:
                return self.environ[key]
            raise _Unfollowed(f"the environment variable {key}")
        try:
            return base[key]
        except (TypeError, KeyError, IndexError) as err:
            raise _Unfollowed(f"`{_source(node)}` ({err})") from None

    def _e_Slice(self, node, scope):
        return slice(*(self._value_or_none(x, scope) for x in (node.lower, node.upper, node.step)))

    def _value_or_none(self, node, scope):
        if node is None:
            return None
        value = self.eval(node, scope)
        _known(value)
        return value

    def _e_BinOp(self, node, scope):
        left, right = self.eval(node.left, scope), self.eval(node.right, scope)
        _known(left)
        _known(right)
        try:
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Div) and isinstance(left, PurePath):
                return left / right
            if isinstance(node.op, ast.Mod) and isinstance(left, str):
                return left % right
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Sub) and isinstance(left, (int, float)):
                return left - right
        except TypeError:
            pass
        raise _Unfollowed(f"`{_source(node)}`")

    def _e_UnaryOp(self, node, scope):
        value = self.eval(node.operand, scope)
        _known(value)
        if isinstance(node.op, ast.Not):
            return not value
        if isinstance(node.op, ast.USub):
            return -value
        raise _Unfollowed(f"`{_source(node)}`")

    def _e_BoolOp(self, node, scope):
        result = None
        for value_node in node.values:
            result = self.eval(value_node, scope)
            _known(result)
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result

    def _e_Compare(self, node, scope):
        left = self.eval(node.left, scope)
        _known(left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comparator, scope)
            _known(right)
            ok = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.In: lambda a, b: a in b,
                  ast.NotIn: lambda a, b: a not in b, ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
                  ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
                  ast.GtE: lambda a, b: a >= b}[type(op)]
            try:
                if not ok(left, right):
                    return False
            except TypeError:
                raise _Unfollowed(f"`{_source(node)}`") from None
            left = right
        return True

    def _e_IfExp(self, node, scope):
        test = self.eval(node.test, scope)
        _known(test)
        return self.eval(node.body if test else node.orelse, scope)

    def _e_JoinedStr(self, node, scope):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                inner = self.eval(value.value, scope)
                _known(inner)
                spec = self.eval(value.format_spec, scope) if value.format_spec else ""
                parts.append(format(inner, spec))
        return "".join(parts)

    def _e_FormattedValue(self, node, scope):
        return str(self.eval(node.value, scope))

    def _comprehension(self, node, scope, build):
        local = dict(scope)
        results = []

        def loop(index):
            if index == len(node.generators):
                results.append(build(local))
                return
            gen = node.generators[index]
            iterable = self.eval(gen.iter, local)
            _known(iterable)
            for item in list(iterable):
                self._assign(gen.target, item, local, node)
                if all(self.eval(cond, local) for cond in gen.ifs):
                    loop(index + 1)

        loop(0)
        return results

    def _e_ListComp(self, node, scope):
        return self._comprehension(node, scope, lambda local: self.eval(node.elt, local))

    _e_GeneratorExp = _e_ListComp

    def _e_SetComp(self, node, scope):
        return set(self._e_ListComp(node, scope))

    def _e_DictComp(self, node, scope):
        pairs = self._comprehension(node, scope, lambda local: (self.eval(node.key, local), self.eval(node.value, local)))
        return dict(pairs)

    def _e_Lambda(self, node, scope):
        return _Lambda(node, scope)

    def _e_Call(self, node, scope):
        func = self.eval(node.func, scope)
        if isinstance(func, _Builtin) and func.name in ("CUDAExtension", "CppExtension", "setup", "load", "load_inline"):
            return self._record(func.name, node, scope)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                inner = self.eval(a.value, scope)
                _known(inner)
                args.extend(inner)
            else:
                args.append(self.eval(a, scope))
        kwargs = {}
        for k in node.keywords:
            value = self.eval(k.value, scope)
            if k.arg is None:
                _known(value)
                kwargs.update(value)
            else:
                kwargs[k.arg] = value
        for value in [*args, *kwargs.values()]:
            _known(value)
        if isinstance(func, _Function):
            return self._call_function(func, args, kwargs, node)
        if isinstance(func, _Lambda):
            local = dict(func.scope)
            for param, value in zip(func.node.args.args, args, strict=False):
                local[param.arg] = value
            return self.eval(func.node.body, local)
        if isinstance(func, _Bound):
            return _call_method(func, args, kwargs, node)
        if isinstance(func, _Builtin):
            handler = _BUILTINS.get(func.name) or _FUNCTIONS.get(func.name)
            if handler is not None:
                try:
                    return handler(self, args, kwargs)
                except (TypeError, ValueError, OSError, KeyError, IndexError) as err:
                    raise _Unfollowed(f"`{_source(node)}` ({err})") from None
        raise _Unfollowed(f"`{_source(node)}`")

    def _call_function(self, func: _Function, args, kwargs, node):
        if self.depth >= MAX_DEPTH:
            raise _Unfollowed("calls nested too deep")
        params = func.node.args
        local = dict(func.scope)
        names = [a.arg for a in params.args]
        defaults = params.defaults
        for name, default in zip(names[len(names) - len(defaults):], defaults, strict=True):
            local[name] = self._safe(default, func.scope)
        for name, value in zip(names, args, strict=False):
            local[name] = value
        for name, value in kwargs.items():
            local[name] = value
        for kw, default in zip(params.kwonlyargs, params.kw_defaults, strict=True):
            if kw.arg not in local and default is not None:
                local[kw.arg] = self._safe(default, func.scope)
        self.depth += 1
        try:
            self._block(func.node.body, local)
        except _Return as ret:
            return ret.value
        finally:
            self.depth -= 1
        return None

    def _record(self, kind: str, node: ast.Call, scope: dict):
        kinds = {"CUDAExtension": "cuda", "CppExtension": "cpp", "setup": "setup", "load": "load",
                 "load_inline": "load_inline"}
        args = [self._safe(a, scope) if not isinstance(a, ast.Starred) else Unknown("*args", node.lineno)
                for a in node.args]
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                expanded = self._safe(k.value, scope)
                if isinstance(expanded, dict):
                    kwargs.update(expanded)
                else:
                    kwargs["**"] = Unknown("**kwargs", node.lineno)
            else:
                kwargs[k.arg] = self._safe(k.value, scope)
        call = Call(kinds[kind], args, kwargs, node.lineno)
        needed = [*args, *(v for k, v in kwargs.items() if k in _NEEDED.get(kinds[kind], ()))]
        unknown = _find_unknown(needed)
        if unknown is not None:
            raise NeedsExecution(f"{kind}(...) is given {unknown.reason}", unknown.line or node.lineno)
        if kind in ("CUDAExtension", "CppExtension"):
            return call  # recorded when setup() receives it
        self.calls.append(call)
        return call


# the arguments of each recorded call that decide what is built (others may stay unknown)
_EXT_NEEDED = ("name", "sources", "include_dirs", "define_macros", "extra_compile_args", "libraries", "extra_link_args",
               "**")
_NEEDED = {
    "cuda": _EXT_NEEDED, "cpp": _EXT_NEEDED, "setup": ("ext_modules", "packages", "package_dir", "**"),
    "load": ("name", "sources", "extra_cflags", "extra_cuda_cflags", "extra_include_paths", "extra_ldflags", "with_cuda",
             "**"),
    "load_inline": ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
                    "extra_include_paths", "extra_ldflags", "with_cuda", "**"),
}


class _Unfollowed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _known(value) -> None:
    unknown = _find_unknown(value)
    if unknown is not None:
        raise _Unfollowed(unknown.reason)


def _find_unknown(value, depth: int = 0) -> Unknown | None:
    if isinstance(value, Unknown):
        return value
    if depth > 6:
        return None
    if isinstance(value, (list, tuple, set)):
        for v in value:
            found = _find_unknown(v, depth + 1)
            if found:
                return found
    if isinstance(value, dict):
        for v in value.values():
            found = _find_unknown(v, depth + 1)
            if found:
                return found
    if isinstance(value, Call):
        for v in [*value.args, *value.kwargs.values()]:
            found = _find_unknown(v, depth + 1)
            if found:
                return found
    return None


def _iterable(value) -> bool:
    return isinstance(value, (list, tuple, set, dict, str, range))


def _source(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - a message only
        return type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class _Module:
    name: str


@dataclass(frozen=True)
class _Builtin:
    name: str


@dataclass(frozen=True)
class _Bound:
    obj: Any
    attr: str


@dataclass
class _Lambda:
    node: ast.Lambda
    scope: dict


class _Environ:
    """os.environ as the script sees it here: what it set itself, nothing else (the build's environment
    is not this machine's)."""

    def __init__(self, evaluator: Evaluator):
        self.evaluator = evaluator


def _symbol(full: str):
    known = _KNOWN.get(full)
    if known in ("os", "os.path", "glob", "sys", "setuptools", "torch.utils", _TORCH_EXT):
        return _Module(known)
    if known in ("CUDA_HOME", "ROCM_HOME"):
        return Unknown(f"{known} (where this machine's toolkit is)", None)
    if known is not None:
        return _Builtin(known)
    if full.startswith(("os.path.", "glob.")):
        return _Builtin(full)
    return Unknown(f"`{full}`", None)


def _call_method(bound: _Bound, args, kwargs, node):
    obj, attr = bound.obj, bound.attr
    if isinstance(obj, _Environ):
        if attr == "get":
            key = args[0]
            default = args[1] if len(args) > 1 else kwargs.get("default")
            return obj.evaluator.environ.get(key, default)
        if attr == "setdefault":
            return obj.evaluator.environ.setdefault(args[0], args[1])
        raise _Unfollowed(f"os.environ.{attr}")
    if isinstance(obj, list) and attr in ("append", "extend", "insert", "index", "count", "copy", "remove"):
        return getattr(obj, attr)(*args)
    if isinstance(obj, dict) and attr in ("get", "keys", "values", "items", "copy", "setdefault", "update"):
        return getattr(obj, attr)(*args, **kwargs)
    if isinstance(obj, str) and attr in ("format", "join", "split", "rsplit", "replace", "strip", "lstrip", "rstrip",
                                         "endswith", "startswith", "lower", "upper", "splitlines", "removesuffix",
                                         "removeprefix"):
        return getattr(obj, attr)(*args, **kwargs)
    if isinstance(obj, PurePath):
        if attr in ("glob", "rglob"):
            return sorted(getattr(Path(obj), attr)(*args))
        if attr in ("resolve", "absolute"):
            return Path(os.path.abspath(obj))
        if attr in ("joinpath", "with_suffix", "with_name", "relative_to", "as_posix", "exists", "is_file", "is_dir"):
            return getattr(Path(obj), attr)(*args)
    raise _Unfollowed(f"`{_source(node)}`")


def _in_root(evaluator: Evaluator, path: str) -> str:
    return path if os.path.isabs(path) else os.path.join(evaluator.root, path)


def _glob(evaluator: Evaluator, args, kwargs):
    pattern = str(args[0])
    recursive = bool(kwargs.get("recursive", False))
    found = sorted(globmod.glob(_in_root(evaluator, pattern), recursive=recursive))
    if not os.path.isabs(pattern):
        found = [os.path.relpath(f, evaluator.root) for f in found]
    return found


def _listdir(evaluator: Evaluator, args, kwargs):
    return sorted(os.listdir(_in_root(evaluator, str(args[0]) if args else ".")))


def _find_packages(evaluator: Evaluator, args, kwargs):
    from setuptools import find_packages  # a walk over folders, nothing of the author's runs

    where = str(kwargs.get("where", args[0] if args else "."))
    include = kwargs.get("include", ("*",))
    exclude = kwargs.get("exclude", ())
    return find_packages(where=_in_root(evaluator, where), include=include, exclude=exclude)


def _abspath(evaluator: Evaluator, args, kwargs):
    return os.path.normpath(_in_root(evaluator, str(args[0])))


_FUNCTIONS: dict[str, Callable] = {
    "os.path.join": lambda e, a, k: os.path.join(*[str(x) for x in a]),
    "os.path.dirname": lambda e, a, k: os.path.dirname(str(a[0])),
    "os.path.basename": lambda e, a, k: os.path.basename(str(a[0])),
    "os.path.abspath": _abspath,
    "os.path.realpath": _abspath,
    "os.path.normpath": lambda e, a, k: os.path.normpath(str(a[0])),
    "os.path.splitext": lambda e, a, k: os.path.splitext(str(a[0])),
    "os.path.split": lambda e, a, k: os.path.split(str(a[0])),
    "os.path.expanduser": lambda e, a, k: str(a[0]),  # a path under the home folder is outside the project anyway
    "os.path.exists": lambda e, a, k: os.path.exists(_in_root(e, str(a[0]))),
    "os.path.isfile": lambda e, a, k: os.path.isfile(_in_root(e, str(a[0]))),
    "os.path.isdir": lambda e, a, k: os.path.isdir(_in_root(e, str(a[0]))),
    "os.path.relpath": lambda e, a, k: os.path.relpath(_in_root(e, str(a[0])), _in_root(e, str(a[1])) if len(a) > 1
                                                       else str(e.root)),
    "os.getcwd": lambda e, a, k: str(e.root),
    "os.makedirs": lambda e, a, k: None,  # a build folder for load(): nothing to record
    "os.mkdir": lambda e, a, k: None,
    "os.listdir": _listdir,
    "os.getenv": lambda e, a, k: e.environ.get(a[0], a[1] if len(a) > 1 else k.get("default")),
    "glob.glob": _glob,
    "glob.iglob": _glob,
    "find_packages": _find_packages,
    "Path": lambda e, a, k: Path(*[str(x) for x in a]) if a else Path(e.root),
    "BuildExtension": lambda e, a, k: _Builtin("BuildExtension"),
    "posixpath.join": lambda e, a, k: posixpath.join(*a),
}
_BUILTINS: dict[str, Callable] = {
    "sorted": lambda e, a, k: sorted(a[0], **{x: y for x, y in k.items() if x == "reverse"}),
    "list": lambda e, a, k: list(a[0]) if a else [],
    "tuple": lambda e, a, k: tuple(a[0]) if a else (),
    "set": lambda e, a, k: set(a[0]) if a else set(),
    "dict": lambda e, a, k: dict(*a, **k),
    "str": lambda e, a, k: str(a[0]) if a else "",
    "len": lambda e, a, k: len(a[0]),
    "print": lambda e, a, k: None,
    "any": lambda e, a, k: any(a[0]),
    "all": lambda e, a, k: all(a[0]),
    "range": lambda e, a, k: range(*a),
}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(n is None or isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError", "OSError",
                                                                 "Exception") for n in names)


def _looks_up_a_module(test: ast.expr) -> bool:
    """Whether an `if` test looks a module up by a literal name (find_spec, find_loader, import_module)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("find_spec", "find_loader", "import_module"):
                return True
    return False
