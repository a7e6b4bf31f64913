"""A kernel's public API, as the version branch on the Hub holds it and as
this push would leave it: what `get_kernel(repo, version=N)` callers rely on.

- Python: the names the variant's package exports (`__all__`, else its public
  names), each function's signature and each class's bases and public methods,
  and the classes of its `layers` module (what `kernels.kernelize` replaces
  layers with). Read statically from the built variant's own files: every
  variant can be read on any machine (a CUDA variant needs no GPU to be read,
  where importing it would), and no kernel code runs during a push.
- Op schemas: the `def("...")` schemas of the [torch] binding sources the
  variants were built from (the compiled library holds them only as data).

The record is `public-api.json` at the root of the version branch, beside
`build/` (inside a variant it would break the variant's digest). A push may add
to it; removing or changing an entry on the same version breaks callers of
that version, so it is refused: bump `version` in build.toml."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from publisher.cxx import mask
from publisher.project.model import Project

API_FILE = "public-api.json"
SCHEMA = 1
PUBLIC_DUNDERS = ("__init__", "__call__")  # private by name, called by every user
_DEF = re.compile(r'\.\s*def\s*\(\s*((?:(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*"\s*)+)')
_LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


@dataclass(frozen=True)
class PublicApi:
    entries: Mapping[str, str]  # "py rmsnorm.rms_norm" -> "(x: torch.Tensor, ...) -> torch.Tensor"; "op rms_norm" -> schema

    def to_json(self) -> str:
        return json.dumps({"schema": SCHEMA, "api": dict(sorted(self.entries.items()))}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> PublicApi | None:
        """None for a record this publisher cannot read (then nothing is compared)."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        api = data.get("api") if isinstance(data, dict) and data.get("schema") == SCHEMA else None
        if not isinstance(api, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in api.items()):
            return None
        return cls(api)

    def functions(self) -> list[tuple[str, str]]:
        return [(k[3:], v) for k, v in sorted(self.entries.items()) if k.startswith("py ") and v.startswith("(")]

    def classes(self) -> list[str]:
        return sorted(k[3:-len("(bases)")] for k in self.entries if k.startswith("py ") and k.endswith("(bases)"))

    def schemas(self) -> list[str]:
        return [v for k, v in sorted(self.entries.items()) if k.startswith("op ")]


@dataclass(frozen=True)
class ApiChange:
    removed: tuple[tuple[str, str], ...]  # (entry, what it was)
    changed: tuple[tuple[str, str, str], ...]  # (entry, before, now)
    added: tuple[tuple[str, str], ...]

    @property
    def breaking(self) -> bool:
        return bool(self.removed or self.changed)

    def lines(self) -> list[str]:
        return ([f"removed {k}: {old}" for k, old in self.removed]
                + [f"changed {k}: {old}  ->  {new}" for k, old, new in self.changed]
                + [f"added {k}: {new}" for k, new in self.added])


def compare(published: PublicApi, now: PublicApi) -> ApiChange:
    old, new = published.entries, now.entries
    return ApiChange(removed=tuple((k, old[k]) for k in sorted(old) if k not in new),
                     changed=tuple((k, old[k], new[k]) for k in sorted(old) if k in new and new[k] != old[k]),
                     added=tuple((k, new[k]) for k in sorted(new) if k not in old))


def extract(project: Project, variant_dirs: list[Path]) -> PublicApi:
    """The API of this push: the Python API of each variant's package (they
    share one package; a name in any of them counts) and the op schemas."""
    entries: dict[str, str] = {}
    for variant in variant_dirs:
        entries.update(python_api(variant, project.python_name))
    entries.update(op_schemas(project))
    return PublicApi(entries)


# ---- Python ----

def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"({ast.unparse(node.args)}){returns}"


def _class(node: ast.ClassDef, key: str) -> dict[str, str]:
    out = {f"{key}(bases)": ", ".join(ast.unparse(b) for b in node.bases) or "object"}
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                not item.name.startswith("_") or item.name in PUBLIC_DUNDERS):
            out[f"{key}.{item.name}"] = _signature(item)
    return out


@dataclass
class _Module:
    defs: dict[str, ast.AST]
    imported: dict[str, tuple[tuple[str, ...], str]]  # local name -> (module, name in it)
    submodules: dict[str, tuple[str, ...]]
    values: set[str]
    exported: list[str] | None  # __all__, when it is a literal


def python_api(variant_dir: Path, package: str) -> dict[str, str]:
    """Entries for the package built flat into `variant_dir`."""
    out: dict[str, str] = {}
    cache: dict[tuple[str, ...], _Module | None] = {}
    seen: set[tuple[tuple[str, ...], str]] = set()

    def module(parts: tuple[str, ...]) -> _Module | None:
        if parts not in cache:
            cache[parts] = _read(variant_dir, parts)
        return cache[parts]

    def emit(parts: tuple[str, ...], name: str, key: str, depth: int = 0) -> None:
        found = module(parts)
        if found is None or depth > 20:
            out[f"py {key}"] = "<external>"
        elif name in found.defs:
            node = found.defs[name]
            if isinstance(node, ast.ClassDef):
                out.update(_class(node, f"py {key}"))
            else:
                out[f"py {key}"] = _signature(node)
        elif name in found.submodules:
            collect(found.submodules[name], key)
        elif name in found.imported:
            source, original = found.imported[name]
            emit(source, original, key, depth + 1)
        else:
            out[f"py {key}"] = "<value>"

    def collect(parts: tuple[str, ...], prefix: str) -> None:
        found = module(parts)
        if found is None or (parts, prefix) in seen:
            return
        seen.add((parts, prefix))
        names = found.exported if found.exported is not None else sorted(
            n for n in (*found.defs, *found.submodules, *found.values, *(n for n, (source, _) in found.imported.items()
                                                                       if not any(p.startswith("_") for p in source)))
            if not n.startswith("_"))
        for name in names:
            emit(parts, name, f"{prefix}.{name}")

    collect((), package)
    if module(("layers",)) is not None:  # kernels.kernelize looks layers up there, exported or not
        collect(("layers",), f"{package}.layers")
    return out


def _file(variant_dir: Path, parts: tuple[str, ...]) -> Path | None:
    base = variant_dir.joinpath(*parts)
    for path in (base / "__init__.py", base.with_suffix(".py") if parts else None):
        if path is not None and path.is_file():
            return path
    return None


def _read(variant_dir: Path, parts: tuple[str, ...]) -> _Module | None:
    path = _file(variant_dir, parts)
    if path is None:
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    package = parts if path.name == "__init__.py" else parts[:-1]
    found = _Module({}, {}, {}, set(), None)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    found.exported = _literal_names(node.value)
                elif isinstance(target, ast.Name):
                    found.values.add(target.id)
        elif isinstance(node, ast.ImportFrom) and node.level:
            up = node.level - 1
            if up > len(package):
                continue
            base = package[:len(package) - up] + tuple((node.module or "").split(".") if node.module else ())
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name == "*":
                    continue
                if _file(variant_dir, (*base, alias.name)) is not None and not node.module:
                    found.submodules[local] = (*base, alias.name)
                else:
                    found.imported[local] = (base, alias.name)
    return found


def _literal_names(value: ast.AST | None) -> list[str] | None:
    try:
        names = ast.literal_eval(value) if value is not None else None
    except (ValueError, SyntaxError, TypeError):
        return None
    return [n for n in names if isinstance(n, str)] if isinstance(names, (list, tuple)) else None


# ---- op schemas ----

def op_schemas(project: Project) -> dict[str, str]:
    """"op <name>" -> the schema as registered (whitespace normalised), for
    every `def(...)` in the [torch] binding sources."""
    framework = project.config.framework
    if framework.kind != "torch" or project.root is None:
        return {}
    out: dict[str, str] = {}
    for rel in framework.src:
        path = project.root / rel
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        for m in _DEF.finditer(mask(text, strings=False)):
            raw = "".join(_LITERAL.findall(m.group(1))).encode().decode("unicode_escape", errors="replace")
            schema = normalise_schema(raw)
            name = schema.split("(", 1)[0].strip()
            if name:
                out[f"op {name}"] = schema if "(" in schema else "<schema inferred from the C++ function>"
    return out


def normalise_schema(text: str) -> str:
    """One spelling per schema: whitespace collapsed, none after `(` or before `)` and `,`, one after `,`
    and around `->`."""
    text = " ".join(text.split())
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+([),])", r"\1", text))
    return re.sub(r"\s*->\s*", " -> ", re.sub(r",(?=\S)", ", ", text))
