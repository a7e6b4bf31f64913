"""The values `publisher adopt` passes from stage to stage: what was found
(the extension and the Python code around it), what the binding holds (ops),
and what will be written (file changes)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from publisher.adopt.types import CType
from publisher.findings import Finding

MARKER = "publisher adopt"  # every file adopt writes names it; guarded edits end with `#endif  // publisher adopt`
WRITTEN = f"Written by {MARKER}"  # the first line of every file adopt writes whole


def written_by_adopt(text: str | None) -> bool:
    return text is not None and WRITTEN in text.split("\n", 1)[0]


@dataclass(frozen=True)
class Extension:
    """One compiled extension as its build script declares it."""

    module: str  # the module the build produced: "simple_knn._C", "lltm_cpp"
    backend: str  # cuda (CUDAExtension, or a .cu source) or cpu
    sources: tuple[str, ...]  # relative to the project root, posix
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()  # NAME or NAME=VALUE
    cxx_flags: tuple[str, ...] = ()
    nvcc_flags: tuple[str, ...] = ()
    link: tuple[str, ...] = ()  # libraries and linker arguments (build.toml has no place for them)
    origin: str = ""  # the file that declares it
    line: int | None = None
    # load_inline: the sources are strings; adopt writes them to these files
    inline_sources: tuple[tuple[str, str], ...] = ()
    inline_functions: tuple[tuple[str, str | None], ...] = ()  # (name, docstring)
    # the same module as the script builds it on a machine without CUDA (its CppExtension there: these sources
    # without the GPU files): the kernel's cpu backend
    cpu_build: Extension | None = None

    @property
    def leaf(self) -> str:
        return self.module.rsplit(".", 1)[-1]

    @property
    def package(self) -> str | None:
        """The package the module lives in (None for a top-level module)."""
        return self.module.split(".")[0] if "." in self.module else None


@dataclass(frozen=True)
class PythonPackage:
    name: str  # import name
    path: str  # its folder, relative to the root


@dataclass(frozen=True)
class Existing:
    """What an existing build.toml already says, kept unless a flag says otherwise."""

    name: str | None = None
    version: int | None = None
    license: str | None = None
    repo_id: str | None = None
    written_by_adopt: bool = False


@dataclass(frozen=True)
class Discovery:
    root: Path
    route: str  # setup.py, load(), build.toml
    how: str  # how it was read: "static" (parsed), "executed" (run with recorders), "read"
    extensions: tuple[Extension, ...]
    packages: tuple[PythonPackage, ...] = ()  # Python packages setup.py installs
    wrappers: tuple[str, ...] = ()  # load(): modules that load the extension and wrap it
    # load(): (file, line, extension module) of each module-level statement that assigns a built extension
    load_sites: tuple[tuple[str, int, str], ...] = ()
    setup_name: str | None = None
    arch_list: tuple[str, ...] | None = None  # TORCH_CUDA_ARCH_LIST the script sets
    existing: Existing = Existing()
    layout_toml: str | None = None  # build.toml route: the file's text
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class OpArg:
    name: str
    ctype: CType
    default: str | None = None  # schema spelling
    kw_only: bool = False


@dataclass(frozen=True)
class Op:
    name: str
    function: str  # the C++ expression bound to it, as written ("lltm_forward", "ns::f")
    args: tuple[OpArg, ...]
    returns: CType
    doc: str | None
    file: str
    line: int
    return_alias: str | None = None  # a returned `Tensor&`: the alias set of the argument it returns
    # the author's own registration (TORCH_LIBRARY, RegisterOperators): the schema as written, without the
    # namespace ("mymuladd(Tensor a, Tensor b, float c) -> Tensor"); None where adopt derives it
    written: str | None = None
    registered_by: str = "pybind11"  # pybind11 (adopt registers it) or library (the author's own registration)
    known: bool = True  # False: torch infers the schema when it registers the op (a lambda adopt cannot read)

    @property
    def overload(self) -> str:
        """The overload name of a written schema (`foo.out(...)` -> `out`); "" for the default one."""
        head = (self.written or "").split("(", 1)[0]
        return head.split(".", 1)[1] if "." in head else ""

    def schema(self) -> str:
        if self.written is not None:
            return self.written
        parts: list[str] = []
        alias = iter("abcdefghijklmnopqrstuvwxyz")
        letters: dict[str, str] = {}
        kw_started = False
        for arg in self.args:
            if arg.kw_only and not kw_started:
                parts.append("*")
                kw_started = True
            spelled = arg.ctype.schema
            if arg.ctype.kind == "tensor" and arg.ctype.mutable:
                letters[arg.name] = next(alias)
                spelled = f"Tensor({letters[arg.name]}!)"
            elif arg.ctype.mutable_optional:
                letters[arg.name] = next(alias)
                spelled = f"Tensor({letters[arg.name]}!)?"
            parts.append(f"{spelled} {arg.name}" + (f"={arg.default}" if arg.default is not None else ""))
        returns = self.returns.schema
        if self.return_alias is not None:
            returns = f"Tensor({letters[self.return_alias]}!)"
        return f"{self.name}({', '.join(parts)}) -> {returns}"

    @property
    def needs_shim(self) -> bool:
        return self.returns.needs_shim or any(a.ctype.needs_shim for a in self.args)


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the project root, posix
    new: str
    old: str | None  # None: the file does not exist
    author: bool  # the file is the author's (adopt did not write it)
    what: str  # one line: what the file is or why it changes

    @property
    def action(self) -> str:
        if self.old is None:
            return "create"
        return "unchanged" if self.old == self.new else "update"

    @property
    def needs_force(self) -> bool:
        """Any existing file: the author's, or one adopt wrote that may have been edited since."""
        return self.action == "update"

    def diff(self) -> str:
        before = [] if self.old is None else self.old.splitlines(keepends=True)
        after = self.new.splitlines(keepends=True)
        return "".join(difflib.unified_diff(before, after, fromfile="/dev/null" if self.old is None else f"a/{self.path}",
                                            tofile=f"b/{self.path}"))


@dataclass(frozen=True)
class AdoptPlan:
    discovery: Discovery
    name: str
    python_name: str
    backends: tuple[str, ...]
    ops: tuple[Op, ...]
    changes: tuple[FileChange, ...]
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = field(default=())  # what was assumed (license found in LICENSE, version 1, ...)

    @property
    def pending(self) -> tuple[FileChange, ...]:
        return tuple(c for c in self.changes if c.action != "unchanged")

    @property
    def needs_force(self) -> tuple[FileChange, ...]:
        return tuple(c for c in self.changes if c.needs_force)
