"""What `publisher adopt` will write: every file as a change (create, update,
unchanged) computed from the author's files as they were before adopt (its
own guards are read through), so that a second run plans nothing new. Nothing
here touches the disk but to read."""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path, PurePosixPath

import tomlkit

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from publisher import cxx
from publisher.adopt import (
    binding,
    buildtoml,
    cpp,
    enclose,
    flags,
    inputs,
    library,
    naming,
    project_tests,
    python,
    replay_tests,
    sources,
    tests_gen,
)
from publisher.adopt.discover import discover, facts
from publisher.adopt.model import (
    MARKER,
    WRITTEN,
    AdoptPlan,
    Discovery,
    Extension,
    FileChange,
    Op,
    PythonPackage,
    written_by_adopt,
)
from publisher.adopt.record import Recording
from publisher.codes import finding
from publisher.errors import ProjectError
from publisher.findings import Finding, Severity
from publisher.project import removed_apis, removed_python, test_imports
from publisher.project import settings as settings_file
from publisher.project.abi3 import TRANSLATION_UNITS

DEFS_FILES = ("torch-ext/torch_binding.cpp", "torch-ext/torch_ops.cpp")
BACKEND_ORDER = ("cpu", "cuda", "rocm", "xpu", "metal")


@dataclass(frozen=True)
class AdoptSettings:
    """The choices a user makes (flags); the rest is found in the project."""

    name: str | None = None
    license: str | None = None
    version: int | None = None
    repo_id: str | None = None
    recording: Recording | None = None  # --record: the project's calls into the original extension


def make_plan(root: Path, settings: AdoptSettings = AdoptSettings()) -> AdoptPlan:
    discovery = discover(root)
    planner = _Planner(discovery, settings)
    return planner.layout() if discovery.route == "build.toml" else planner.extensions()


@cache
def _build_defines(backend: str) -> tuple[str, ...]:
    """Macros every kernel-builder build defines for a backend's sources (the binding's #if see them)."""
    macro = binding._dispatch().get(backend, {}).get("macro")
    return tuple(m for m in ("Py_LIMITED_API", macro, "USE_CUDA" if backend == "cuda" else None) if m)


@dataclass(frozen=True)
class _ExtensionRead:
    """What an extension's sources bind, read before any is ported."""

    bindings: tuple[binding.Binding, ...]  # its pybind11 modules
    files: tuple[str, ...]  # its translation units and the project headers they include
    ops: list[Op]  # bound by its modules, then registered by its op registrations (TORCH_LIBRARY, ...)


def _twins(exts: Sequence[Extension], enclosed: set[str], ops_by_ext: dict[str, list[Op]]) -> set[str]:
    """Names of the pybind11-bound ops that a CPU extension compiled into the GPU variants binds and a GPU
    extension binds too (RoIAlign.pytorch's crop_and_resize_cpu and _gpu: `forward`, `backward`): one op, the CPU
    extension's kernel for CPU tensors and the GPU one's for the GPU's."""
    def bound(ext: Extension) -> set[str]:
        return {op.name for op in ops_by_ext.get(ext.module, []) if op.registered_by != "library"} \
            | {f for f, _ in ext.inline_functions}

    on_cpu = {name for e in exts if e.module in enclosed for name in bound(e)}
    on_gpu = {name for e in exts if e.backend != "cpu" for name in bound(e)}
    return on_cpu & on_gpu


def _registration_scope(ext: Extension, enclosed: bool, gpu: Sequence[str],
                        twins: set[str]) -> tuple[tuple[str, ...], dict[str, set[str]]]:
    """The backends whose variants compile the extension's sources, and (dispatch key -> op names) the keys
    another extension's kernel registers those ops for in the same variant (binding.registration_block)."""
    dispatch = binding._dispatch()
    host = dispatch[binding.HOST_BACKEND]["key"]
    if ext.backend != binding.HOST_BACKEND and ext.cpu_build is not None:
        return (binding.HOST_BACKEND, ext.backend), {host: twins}  # its build without CUDA: the cpu variants
    if ext.backend != binding.HOST_BACKEND:
        return (ext.backend,), {host: twins}
    if enclosed:
        return (ext.backend, *gpu), {dispatch[b]["key"]: twins for b in gpu if b in dispatch}
    return (ext.backend,), {}


class _Planner:
    def __init__(self, discovery: Discovery, settings: AdoptSettings):
        self.d = discovery
        self.root = discovery.root
        self.settings = settings
        self.findings: list[Finding] = list(discovery.findings)
        self.changes: dict[str, FileChange] = {}
        self.notes: list[str] = []
        self._texts: dict[str, str | None] = {}
        self._moved: dict[str, str] = {}  # old module name -> its name in the kernel's package (for the tests)

    # --- files --------------------------------------------------------------------------------

    def read(self, rel: str) -> str | None:
        if rel not in self._texts:
            self._texts[rel] = sources.read_text(self.root / rel)
        return self._texts[rel]

    def original(self, rel: str) -> str | None:
        """The file as the author wrote it: adopt's guards read through."""
        text = self.read(rel)
        return binding.unport(library.unport(text)) if text is not None else None

    def change(self, rel: str, new: str, what: str) -> None:
        old = self.read(rel)
        author = old is not None and not written_by_adopt(old)
        self.changes[rel] = FileChange(rel, new, old, author, what)

    def lookup(self, tu: str, text: str, include_dirs: Sequence[str], extra: Sequence[tuple[str, str]] = ()):
        """Declarations visible in translation unit `tu` (its own text and the project headers it includes)."""
        files = [(tu, text), *extra]
        for header in sources.project_headers(self.root, [tu], include_dirs):
            header_text = self.original(header)
            if header_text is not None:
                files.append((header, header_text))

        def find(name: str):
            out = []
            for rel, body in files:
                for decl in cpp.find_declarations(body, cpp.mask(body), name):
                    out.append((rel, body, decl))
            return out
        return find

    # --- the setup.py and load() routes ---------------------------------------------------------

    def extensions(self) -> AdoptPlan:
        d = self.d
        exts = list(d.extensions)
        main_pkg = self._main_package()
        name = naming.choose_name(d, self.settings.name, main_pkg.name if main_pkg else None)
        python_name = name.value.replace("-", "_")
        self.notes.append(f"name {name.value} (from {name.source}); Python package {python_name}")
        defs_path = self._defs_path([s for e in exts for s in e.sources])
        self._read_libraries(exts, self._python_namespaces(main_pkg))
        ops_by_ext: dict[str, list[Op]] = {ext.module: [] for ext in exts}
        read = {ext.module: self._read_extension(ext) for ext in exts if not ext.inline_sources}
        for module, found in read.items():
            ops_by_ext[module] = found.ops
        exts = [self._same_ops_without_cuda(ext, ops_by_ext[ext.module]) for ext in exts]
        backends = tuple(sorted({e.backend for e in exts} | {"cpu" for e in exts if e.cpu_build},
                                key=BACKEND_ORDER.index))
        enclosed = self._cpu_enclosed(exts, ops_by_ext)
        gpu = [b for b in backends if b != "cpu"]
        twins = _twins(exts, enclosed, ops_by_ext)
        kernels: list[buildtoml.KernelTable] = []
        for ext in exts:
            compiled_for, elsewhere = _registration_scope(ext, ext.module in enclosed, gpu, twins)
            if ext.inline_sources:
                ops_by_ext[ext.module] = self._port_inline(ext, defs_path, compiled_for, elsewhere)
            else:
                self._port_extension(ext, read[ext.module], defs_path, compiled_for, elsewhere)
            kernels.append(self._kernel_table(ext, python_name, len(exts), defs_path))
        kernels += self._cpu_in_gpu_variants(exts, kernels, gpu, enclosed)
        kernels += [self._cpu_kernel_table(ext.cpu_build, table.name, python_name, len(exts), defs_path)
                    for ext, table in zip(exts, kernels, strict=False) if ext.cpu_build is not None]
        all_ops = self._unique_ops(ops_by_ext)
        module_label = ", ".join(e.module for e in exts)
        fragment = self._library_file is not None
        self.change(defs_path, binding.defs_file_text(all_ops, module_label, self._binding_files(exts),
                                                      fragment=fragment),
                    f"the torch ops ({len(all_ops)}) of the kernel: their schemas, and the module's entry point")
        license_, version = self._license_version()
        repo_id = self.settings.repo_id or d.existing.repo_id
        origin = " and ".join(f"the {self._ext_kind(e)} `{e.module}` ({e.origin})"
                              + (" and its CppExtension without CUDA" if e.cpu_build else "") for e in exts)
        self.change("build.toml", buildtoml.render(buildtoml.BuildToml(
            route=d.route, origin=origin, name=name.value, version=version, license=license_, backends=backends,
            torch_src=(defs_path,), kernels=tuple(kernels), repo_id=repo_id)), "the kernel-builder build file")
        self._listed_files_exist()
        access = self._python(exts, ops_by_ext, main_pkg, python_name)
        self._tests(name.value, python_name, version, repo_id, backends, _testable(all_ops), access, exts)
        self._port_removed_python()
        self._declare_test_depends(python_name, backends)
        return AdoptPlan(d, name.value, python_name, backends, tuple(all_ops), tuple(self.changes.values()),
                         tuple(self.findings), tuple(self.notes))

    def _same_ops_without_cuda(self, ext: Extension, ops: Sequence[Op]) -> Extension:
        """`ext`, keeping its build without CUDA (discover: the kernel's cpu backend) only where that build binds
        and registers the same ops: the two are one op set, a kernel per backend."""
        if ext.cpu_build is None:
            return ext
        cpu = ext.cpu_build
        kept = len(self.findings)
        without = self._read_extension(cpu)
        del self.findings[kept:]  # what reading the same sources again says, it has said
        defines = set(_macro_names((*cpu.defines, *_flag_defines(cpu.cxx_flags), *_build_defines(cpu.backend))))
        units = [s for s in cpu.sources if s.endswith(TRANSLATION_UNITS)]
        found = cuda_include(self.root, units, cpu.include_dirs, defines)
        if found:
            rel, line, header = found
            reason = f"{rel}:{line} includes <{header}> there, which only a CUDA toolkit has"
        else:
            if {op.name for op in without.ops} == {op.name for op in ops}:
                return ext
            missing = sorted({op.name for op in ops} - {op.name for op in without.ops})
            extra = sorted({op.name for op in without.ops} - {op.name for op in ops})
            reason = "it has other ops (" + "; ".join(filter(None, [missing and f"lacks {', '.join(missing)}",
                                                                    extra and f"adds {', '.join(extra)}"])) + ")"
        self.findings = [f for f in self.findings if not (f.code == "PA108" and f"`{ext.module}`" in f.message)]
        self.notes.append(f"setup.py builds `{ext.module}` without CUDA too, but {reason}: the kernel keeps the CUDA "
                          "build only")
        return replace(ext, cpu_build=None)

    def _cpu_kernel_table(self, cpu: Extension, cuda_kernel: str, python_name: str, count: int,
                          defs_path: str) -> buildtoml.KernelTable:
        """The kernel table of an extension's build without CUDA (its cpu backend): its own sources and flags,
        named after the CUDA build's table."""
        kept = len(self.findings)
        table = self._kernel_table(cpu, python_name, count, defs_path)
        said = {(f.code, f.message) for f in self.findings[:kept]}
        self.findings[kept:] = [f for f in self.findings[kept:] if (f.code, f.message) not in said]
        return replace(table, name=f"{cuda_kernel}_cpu")

    def _listed_files_exist(self) -> None:
        """build.toml names only files the project has or adopt writes (a refusal elsewhere never leaves a
        build.toml naming a file nobody wrote): otherwise build.toml is not written, and the finding says which."""
        data = tomllib.loads(self.changes["build.toml"].new)
        listed = list((data.get("torch") or {}).get("src") or [])
        for kernel in (data.get("kernel") or {}).values():
            listed += list(kernel.get("src") or [])
        missing = [rel for rel in dict.fromkeys(listed) if rel not in self.changes and not (self.root / rel).is_file()]
        if missing:
            del self.changes["build.toml"]
            self.findings.append(finding(
                "PA175", f"build.toml would name {', '.join(missing)}, which neither the project has nor adopt writes; "
                "build.toml is not written", file=str(self.root / "build.toml"),
                hint="fix what the findings above name, then rerun publisher adopt"))

    def _ext_kind(self, ext: Extension) -> str:
        if ext.inline_sources:
            return "load_inline() module"
        if self.d.route == "load()":
            return "load() module"
        return "CUDAExtension" if ext.backend == "cuda" else "CppExtension"

    def _main_package(self) -> PythonPackage | None:
        """The installed package the kernel's package is carried from; None where there is none, or where
        setup.py installs several and none holds the extension (Deformable-DETR's `functions` and `modules`,
        which import each other relatively: `from ..functions import X`): those become subpackages of the
        kernel's package (self._subpackages), where the relative imports between them hold as written."""
        packages = list(self.d.packages)
        self._subpackages: tuple[PythonPackage, ...] = ()
        for ext in self.d.extensions:
            for pkg in packages:
                if pkg.name == ext.package:
                    return pkg
        if len(packages) == 1:
            return packages[0]
        self._subpackages = tuple(packages)
        return None

    def _defs_path(self, ext_sources: Sequence[str]) -> str:
        for path in DEFS_FILES:
            text = self.read(path)
            if written_by_adopt(text) or (text is None and path not in ext_sources):
                return path
        raise ProjectError(f"{self.root}: {' and '.join(DEFS_FILES)} both exist and are not adopt's",
                           "move one aside: adopt writes the torch op registration there")

    def _binding_files(self, exts: Sequence[Extension]) -> list[str]:
        found = []
        for ext in exts:
            for src in ext.sources:
                text = self.original(src)
                if text is not None and binding.has_module(text):
                    found.append(src)
            found += [path for path, _ in ext.inline_sources if path.endswith(".cpp")]
        return found

    def _read_extension(self, ext: Extension) -> _ExtensionRead:
        """What a (setup.py or load()) extension binds: its pybind11 modules and op registrations."""
        defines = (*ext.defines, *_flag_defines(ext.cxx_flags), *_build_defines(ext.backend))
        bindings: list[binding.Binding] = []
        units = [s for s in ext.sources if s.endswith(TRANSLATION_UNITS)]
        for src in units:
            text = self.original(src)
            if text is None or not binding.has_module(text):
                continue
            found = binding.read_binding(src, text, self.lookup(src, text, ext.include_dirs), defines)
            if found is not None:
                bindings.append(found)
                self.findings += found.findings
        files = [*units, *sources.project_headers(self.root, units, ext.include_dirs)]
        libraries = [self._libraries[rel] for rel in files if rel in self._libraries]
        if not bindings and not any(lib.ops or lib.heads for lib in libraries):
            self._no_binding(ext, units)
        ops = [op for b in bindings for op in b.ops] + [op for lib in libraries for op in lib.ops]
        return _ExtensionRead(tuple(bindings), tuple(files), ops)

    def _port_extension(self, ext: Extension, found: _ExtensionRead, defs_path: str, compiled_for: Sequence[str],
                        elsewhere: Mapping[str, Collection[str]]) -> None:
        """The extension's sources ported: each pybind11 module guarded, its functions registered in the variants
        of `compiled_for` (binding.registration_block, with `elsewhere`); op registrations under the kernel's
        namespace; removed torch APIs replaced."""
        ported = {b.file: b for b in found.bindings}
        without_cuda = self._flavour_bindings(ext)
        for rel in found.files:
            text = self.original(rel)
            if text is None:
                continue
            new, what = text, []
            if rel in ported:
                other = without_cuda.get(rel)
                if other is not None and other.block.start != ported[rel].block.start:
                    # one module per flavour (`#ifdef USE_CUDA ... #else ... #endif`): each registers its own
                    gpu = tuple(b for b in compiled_for if b != binding.HOST_BACKEND)
                    new = binding.port_binding(ported[rel], gpu, defs_path, elsewhere,
                                               [(other, (binding.HOST_BACKEND,))])
                else:
                    new = binding.port_binding(ported[rel], compiled_for, defs_path, elsewhere)
                what.append(f"the pybind11 module guarded; {len(ported[rel].ops)} op kernel(s) registered beside it")
            if rel in self._libraries:
                registered = library.port(new, self._libraries[rel], self._namespaces, rel == self._library_file)
                if registered != new:
                    what.append("its op registrations under the kernel's own namespace (the author's kept for their "
                                "build)")
                new = registered
            guarded = binding.guard_includes(new)
            if guarded != new and rel not in ported:
                what.append("pybind11 includes guarded (they do not compile against the limited API)")
            new = self._port_removed_apis(rel, guarded, what)
            if new != text or self.read(rel) != text:
                self.change(rel, new, "; ".join(what))

    def _flavour_bindings(self, ext: Extension) -> dict[str, binding.Binding]:
        """file -> its binding as the extension's build without CUDA (its cpu backend) reads it, where a file
        holds module blocks for several flavours; {} otherwise."""
        if ext.cpu_build is None:
            return {}
        kept = len(self.findings)
        read = self._read_extension(ext.cpu_build)
        del self.findings[kept:]  # what reading the same sources again says, it has said
        return {b.file: b for b in read.bindings}

    def _port_removed_apis(self, rel: str, text: str, what: list[str]) -> str:
        """`text` with the torch C++ APIs torch removed (or deprecated) replaced where the replacement is exact
        (project/removed_apis.py: THCudaCheck -> C10_CUDA_CHECK, AT_CHECK -> TORCH_CHECK, .data<T>() ->
        .data_ptr<T>(), ...); each use left is a finding with its fix, an error where no torch publisher builds
        for compiles it."""
        if not removed_apis.is_source(PurePosixPath(rel)):
            return text
        return self._removed_api_findings(rel, removed_apis.port_text(text, rel), what, "C++")

    def _removed_api_findings(self, rel: str, ported: removed_apis.PortedFile, what: list[str], language: str) -> str:
        """PA181 for what a port replaced, PA182 for each use left; the ported text."""
        if ported.ported:
            names = sorted({u.api.name for u in ported.ported})
            what.append(f"removed torch APIs ported ({'; '.join(names)})")
            self.findings.append(finding(
                "PA181", f"{len(ported.ported)} use(s) of torch {language} APIs torch removed or deprecated, ported to "
                f"their exact replacement: {'; '.join(names)}", file=rel, line=ported.ported[0].line,
                hint="read the diff (--dry-run); the author's build compiles the new text too"
                if language == "C++" else "read the diff (--dry-run)"))
        versions = _matrix_torch_versions()
        for use in ported.left:
            blocking = removed_apis.blocks(use.api, versions)
            when = (f"removed in torch {use.api.removed_in}" if use.api.removed_in
                    else f"deprecated since torch {use.api.deprecated_in}")
            still = "; still compiles" if language == "C++" else "; some torch of the matrix still has it"
            self.findings.append(finding(
                "PA182", f"`{use.text}`: {use.api.name}, {when}" + ("" if blocking else still),
                file=rel, line=use.line, hint=use.fix() + f" ({use.api.reference})",
                severity=None if blocking else Severity.WARNING))
        return ported.text

    def _port_removed_python(self) -> None:
        """The Python adopt writes into the kernel's package and tests, with the torch Python modules torch removed
        (torch._six) replaced where the replacement is exact (project/removed_python.py); each use left a finding."""
        for rel, change in list(self.changes.items()):
            if not rel.endswith(".py") or not rel.startswith(("torch-ext/", "tests/")):
                continue
            what: list[str] = []
            new = self._removed_api_findings(rel, removed_python.port_python(change.new, rel), what, "Python")
            if new != change.new:
                self.changes[rel] = replace(change, new=new, what="; ".join([change.what, *what]))

    def _python_namespaces(self, main_pkg: PythonPackage | None) -> set[str]:
        """The op namespaces the project's Python code defines ops in (torch.library.custom_op("ns::op"), ...)."""
        carried = [main_pkg] if main_pkg else list(self._subpackages)
        files = [f"{pkg.path}/{rel}" for pkg in carried for rel in sources.walk(self.root / pkg.path, (".py",))]
        return {ns for rel in [*files, *self.d.wrappers] for ns in python.defined_namespaces(self.original(rel) or "")}

    def _read_libraries(self, exts: Sequence[Extension], python_namespaces: set[str]) -> None:
        """The op registrations (TORCH_LIBRARY, RegisterOperators) of every source and project header, the
        namespaces they (and the project's Python code) define ops in, and the one file whose TORCH_LIBRARY stays
        one (TORCH_LIBRARY_EXPAND)."""
        self._libraries: dict[str, library.LibraryFile] = {}
        for ext in exts:
            if ext.inline_sources:
                continue
            defines = (*ext.defines, *_flag_defines(ext.cxx_flags), *_build_defines(ext.backend))
            units = [s for s in ext.sources if s.endswith(TRANSLATION_UNITS)]
            for rel in [*units, *sources.project_headers(self.root, units, ext.include_dirs)]:
                text = self.original(rel)
                if rel in self._libraries or text is None or not library.has_registrations(text):
                    continue
                found = library.read_library(rel, text, self.lookup(rel, text, ext.include_dirs), defines)
                if found is not None:
                    self._libraries[rel] = found
                    self.findings += found.findings
        self._namespaces = {ns for lib in self._libraries.values() for ns in lib.namespaces} | python_namespaces
        owners = sorted(rel for rel, lib in self._libraries.items()
                        if any(h.macro == "TORCH_LIBRARY" and h.namespace in self._namespaces for h in lib.heads))
        self._library_file = owners[0] if owners else None
        if self._namespaces:
            where = sorted(self._libraries)
            self.findings.append(finding(
                "PA173", f"ops registered under the namespace(s) {', '.join(sorted(self._namespaces))}"
                + (f" ({', '.join(where)})" if where else "") + ": registered under the kernel's own namespace in "
                "kernel-builder builds, and the Python code's torch.ops and torch.library names ported to match",
                file=where[0] if where else None, hint="two builds of the kernel now load side by side"))

    def _no_binding(self, ext: Extension, units: Sequence[str]) -> None:
        self.findings.append(finding("PA111", f"`{ext.module}`: no PYBIND11_MODULE and no op registration "
                                     f"(TORCH_LIBRARY, RegisterOperators) in its sources ({', '.join(units) or 'none'})",
                                     file=ext.origin, line=ext.line,
                                     hint="bind its functions with PYBIND11_MODULE, or register torch ops with "
                                          "TORCH_LIBRARY"))

    def _port_inline(self, ext: Extension, defs_path: str, compiled_for: Sequence[str],
                     elsewhere: Mapping[str, Collection[str]]) -> list[Op]:
        defines = (*ext.defines, *_flag_defines(ext.cxx_flags), *_build_defines(ext.backend))
        texts = dict(ext.inline_sources)
        cpp_path = next(p for p in texts if p.endswith(".cpp"))
        cpp_text = texts[cpp_path]
        module = "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + "".join(
            f'  m.def("{f}", &{f}' + (f', "{_c_escape(doc)}"' if doc else "") + ");\n"
            for f, doc in ext.inline_functions) + "}\n"
        others = [(p, t) for p, t in texts.items() if p != cpp_path]
        read = binding.read_binding(cpp_path, cpp_text + module, self.lookup(cpp_path, cpp_text + module, (), others),
                                    defines)
        ops = list(read.ops) if read else []
        if read:
            self.findings += read.findings
        registration = binding.registration_block(ops, compiled_for, elsewhere)
        self.change(cpp_path, f"// {WRITTEN} from the load_inline() call of {ext.origin}:{ext.line}\n" + cpp_text
                    + f"\n// Registered by {MARKER}: the functions load_inline bound.\n"
                    "#include <torch/library.h>\n\n#include \"registration.h\"\n\n" + registration,
                    "the C++ source load_inline compiled, with its op kernels registered")
        for path, text in others:
            self.change(path, text, "the CUDA source load_inline compiled")
        return ops

    def _cpu_enclosed(self, exts: Sequence[Extension], ops_by_ext: dict[str, list[Op]]) -> set[str]:
        """The CPU extensions whose sources the GPU variants compile too (_cpu_in_gpu_variants): a project with a
        CPU extension beside a CUDA one (torchsort: isotonic_cpu and isotonic_cuda, the same functions) has both
        on a CUDA machine. Not so where the CPU extension registers its ops itself (TORCH_LIBRARY,
        RegisterOperators) and a GPU extension registers them all too (torch_scatter's _scatter_cpu and
        _scatter_cuda): the original loaded one of the two, and in one library the second registration of an op
        is an error; nor a load_inline() module."""
        if not any(e.backend != "cpu" for e in exts):
            return set()
        on_gpu = {op.name for e in exts if e.backend != "cpu" for op in ops_by_ext.get(e.module, [])}
        on_gpu |= {f for e in exts if e.backend != "cpu" for f, _ in e.inline_functions}
        out = set()
        for ext in exts:
            if ext.backend != "cpu" or ext.inline_sources:
                continue
            own = ops_by_ext.get(ext.module, [])
            if own and all(op.registered_by == "library" and op.name in on_gpu for op in own):
                continue
            out.add(ext.module)
        return out

    def _cpu_in_gpu_variants(self, exts: Sequence[Extension], tables: Sequence[buildtoml.KernelTable],
                             gpu: Sequence[str], enclosed: set[str]) -> list[buildtoml.KernelTable]:
        """kernel-builder compiles a variant from its backend's kernels only, so the sources of each CPU
        extension in `enclosed` are listed again as a kernel of each GPU backend: the cuda variant registers the
        CPU kernels too, as the original module did."""
        out = []
        for ext, table in zip(exts, tables, strict=True):
            if ext.module not in enclosed:
                continue
            for backend in gpu:
                name = f"{table.name}_{backend}"
                src = tuple(self._enclosed(rel, name, backend, table.include) for rel in table.src)
                out.append(replace(table, name=name, backend=backend, src=src, cuda_flags=(), capabilities=()))
                self.notes.append(f"the CPU extension `{ext.module}` is compiled into the {backend} variants too "
                                  f"(kernel {name}), as the original builds it beside the {backend} one; inside a "
                                  f"namespace of its own (torch-ext/{name}/), as the two were separate modules")
        return out

    def _enclosed(self, rel: str, kernel: str, backend: str, include_dirs: Sequence[str]) -> str:
        """A wrapper of C++ source `rel` that compiles it inside a namespace of its own (publisher/adopt/enclose.py:
        the CPU extension's functions and the GPU one's often have the same names, in one .so now); `rel` itself
        where it is not C++ or its conditionals cannot be replayed."""
        if PurePosixPath(rel).suffix not in (".cpp", ".cc", ".cxx", ".C"):
            return rel

        def text(path: str) -> str | None:
            change = self.changes.get(path)
            return change.new if change is not None else self.read(path)

        def resolve(including: str, quote: str, name: str) -> str | None:
            candidates = [str(PurePosixPath(including).parent / name)] if quote == '"' else []
            candidates += [str(PurePosixPath(d) / name) for d in include_dirs]
            for candidate in candidates:
                found = sources.relative(self.root, candidate)
                if found and (self.root / found).is_file():
                    return found
            return None

        replayed = enclose.skeleton(rel, text, resolve)
        if not enclose.balanced(replayed):
            return rel
        path = f"torch-ext/{kernel}/{rel.replace('/', '__')}"
        namespace = "publisher_" + re.sub(r"\W", "_", kernel)
        note = (f"{WRITTEN}: {rel} compiled into the {backend} variants inside namespace {namespace}, so that its "
                f"functions do not collide with the {backend} extension's of the same names.")
        ops_name = "TORCH_EXTENSION_NAME" in (text(rel) or "")
        opened = enclose.opened_namespaces([text(f) or "" for f in enclose.enclosed_files(rel, text, resolve)])
        self.change(path, enclose.wrapper(rel, path, namespace, replayed, note, ops_name, opened),
                    f"{rel} for the {backend} variants")
        return path

    def _unique_ops(self, ops_by_ext: dict[str, list[Op]]) -> list[Op]:
        seen: dict[str, Op] = {}
        out = []
        for module, ops in ops_by_ext.items():
            for op in ops:
                if op.name in seen and seen[op.name].schema() == op.schema():
                    continue  # the same function of another backend's extension: one op, a kernel per backend
                if op.name in seen and "library" in (op.registered_by, seen[op.name].registered_by):
                    self.findings.append(finding(
                        "PA174", f"`{op.name}` is defined twice ({seen[op.name].file}:{seen[op.name].line} and "
                        f"{op.file}:{op.line}): one kernel has one op of a name", file=op.file, line=op.line,
                        hint="rename one (and its callers)"))
                    continue
                if op.name in seen:
                    self.findings.append(finding("PA112", f"`{op.name}` is bound by two extensions ({module} and "
                                                 f"another) with different signatures ({seen[op.name].schema()} and "
                                                 f"{op.schema()}); one kernel has one op of a name", file=op.file,
                                                 line=op.line, hint="give both the same signature, or rename one"))
                    continue
                seen[op.name] = op
                out.append(op)
        return out

    def _kernel_table(self, ext: Extension, python_name: str, count: int, defs_path: str) -> buildtoml.KernelTable:
        cxx = flags.sort_flags(ext.cxx_flags)
        nvcc = (flags.sort_flags(flags.as_torch_extension_nvcc(ext.nvcc_flags)) if ext.backend == "cuda"
                else flags.SortedFlags((), (), (), ()))
        includes = list(ext.include_dirs)
        for folder in [*cxx.includes, *nvcc.includes]:
            rel = sources.relative(self.root, folder)
            if rel is None:
                self.findings.append(finding("PA151", f"`{ext.module}`: include folder {folder} is outside the project "
                                             "(left out)", file=ext.origin, line=ext.line))
            elif rel not in includes:
                includes.append(rel)
        dropped = sorted(set(cxx.dropped + nvcc.dropped))
        if dropped:
            self.findings.append(finding("PA142", f"`{ext.module}`: {' '.join(dropped)} left out (the build sets the "
                                         "optimisation level, C++ standard and ABI itself)", file=ext.origin,
                                         line=ext.line))
        if ext.link:
            self.findings.append(finding("PA141", f"`{ext.module}` links {' '.join(ext.link)}: build.toml has no link "
                                         "flags; the kernel links torch and the CUDA runtime", file=ext.origin,
                                         line=ext.line, hint="check the kernel loads; the libraries torch loads "
                                                             "(cuBLAS, ...) resolve through torch"))
        arch_list = list(self.d.arch_list or ())
        unknown = flags.unknown_arch_names(arch_list)
        if unknown:
            self.findings.append(finding("PA142", f"TORCH_CUDA_ARCH_LIST entries {', '.join(unknown)} are not "
                                         "capabilities; left out", file=ext.origin))
        capabilities = flags.merge_capabilities([*nvcc.archs, *(a for a in arch_list if a not in unknown)]) \
            if ext.backend == "cuda" else ()
        outdated = _outdated(capabilities)
        if outdated and self.d.how != "executed":
            # pointnet2_ops pins 3.7+PTX ... 7.5: a list for the GPUs of its day. What is left of it builds a kernel
            # no current GPU runs (no PTX survives), so the build's defaults, as for a script that names none.
            self.findings.append(finding(
                "PA144", f"`{ext.module}`: CUDA architectures {', '.join(outdated)} are compiled by no CUDA toolkit "
                f"publisher builds with; the list ({', '.join(capabilities)}) is left out and the kernel is built for "
                "the toolkit's default capabilities", file=ext.origin, line=ext.line,
                hint="to narrow them, set cuda-capabilities in the kernel's table of build.toml"))
            capabilities = ()
        if capabilities and self.d.how == "executed":
            # The script chose them when it ran, under recorders that answer for a GPU they do not have
            # (fused-ssim: the detected GPU's arch, else a fallback list without sm_90): what it picks on one
            # machine is not what a Hub kernel must run on. The build's default capabilities instead.
            self.findings.append(finding(
                "PA143", f"`{ext.module}`: setup.py picks CUDA architectures when it runs ({', '.join(capabilities)} "
                "here, where no GPU answered); the kernel is built for the toolkit's default capabilities instead",
                file=ext.origin, line=ext.line,
                hint="to narrow them, set cuda-capabilities in the kernel's table of build.toml"))
            capabilities = ()
        src = [s for s in ext.sources if s != defs_path] if not ext.inline_sources else [p for p, _ in ext.inline_sources]
        headers = sources.project_headers(self.root, src, includes) if not ext.inline_sources else []
        kernel = python_name if count == 1 else f"{python_name}_{re.sub(r'[^0-9A-Za-z_]', '_', ext.leaf).strip('_')}"
        macros = tuple(f"-D{d}" for d in ext.defines)  # define_macros reach every compiler, as setuptools passes them
        return buildtoml.KernelTable(kernel, ext.backend, tuple(src + [h for h in headers if h not in src]),
                                     tuple(includes), macros + cxx.kept, (macros + nvcc.kept) if ext.backend == "cuda" else (),
                                     capabilities)

    def _license_version(self) -> tuple[str, int]:
        license_, problems = naming.choose_license(self.d, self.settings.license)
        self.findings += problems
        version, problems = naming.choose_version(self.d, self.settings.version)
        self.findings += problems
        self.notes.append(f"license {license_.value} (from {license_.source}); version {version.value} "
                          f"(from {version.source})")
        return str(license_.value), int(version.value)

    # --- Python -------------------------------------------------------------------------------

    def _python(self, exts: Sequence[Extension], ops_by_ext: dict[str, list[Op]], main_pkg: PythonPackage | None,
                python_name: str) -> dict[str, str]:
        """Write the package; returns op name -> attribute path from the loaded kernel to the function."""
        pkg_dir = f"torch-ext/{python_name}"
        inside = self._free_names({e.module: (e.module.split(".", 1)[1] if e.package else e.module) for e in exts},
                                  main_pkg)
        old_package = main_pkg.name if main_pkg else next((e.package for e in exts if e.package), None)
        loads = dict(inside)
        self._moved = {m: f"{python_name}.{path}" for m, path in inside.items() if path.rpartition(".")[2] != python.OPS_MODULE}
        if old_package:
            self._moved[old_package] = python_name
        planned: set[str] = set()
        carried_init: str | None = None
        if main_pkg is not None:
            if main_pkg.name != python_name:
                self.notes.append(f"the package {main_pkg.name} is carried as {python_name} (the kernel's Python name)")
            for rel in sources.walk(self.root / main_pkg.path, (".py",)):
                source = f"{main_pkg.path}/{rel}"
                target = f"{pkg_dir}/{rel}"
                text = self.original(source)
                if text is None or (PurePosixPath(rel).name == "_ops.py"):
                    continue
                depth = len(PurePosixPath(rel).parts) - 1
                ctx = python.ImportContext(inside, old_package, depth, frozenset(self._namespaces))
                new, problems = python.rewrite(text, source, ctx, loads, self._sites(source))
                self.findings += problems
                if rel == "__init__.py":
                    carried_init = target
                self.change(target, new, "the package's own module" + (", imports rewritten" if new != text else "")
                            + ("" if source == target else f" (from {source})"))
                planned.add(target)
        subpackages = self._carry_subpackages(pkg_dir, inside, loads, planned)
        wrapper_names = []
        for rel in self.d.wrappers:
            target = f"{pkg_dir}/{PurePosixPath(rel).name}"
            if target in planned:
                self.findings.append(finding("PA121", f"{rel} has the name of a module of the package; not carried",
                                             file=rel))
                continue
            text = self.original(rel) or ""
            new, problems = python.rewrite(text, rel, python.ImportContext(inside, old_package, 0,
                                                                           frozenset(self._namespaces)),
                                           loads, self._sites(rel))
            self.findings += problems
            self.change(target, new, f"carried from {rel}, imports rewritten")
            planned.add(target)
            wrapper_names.append(PurePosixPath(rel).stem)
        access: dict[str, str] = {}
        modules: list[tuple[str, list[str]]] = []
        for ext in exts:
            path = inside[ext.module]
            ops = ops_by_ext.get(ext.module, [])
            if path.rpartition(".")[2] == python.OPS_MODULE:
                for op in ops:
                    access[op.name] = "_ops.ops"
                continue
            target = f"{pkg_dir}/{path.replace('.', '/')}.py"
            if not any(op.registered_by == "pybind11" for op in ops) and not ext.inline_sources:
                for op in ops:
                    access[op.name] = "_ops.ops"
                if not self._imported(ext, planned):
                    continue  # its library registers the ops itself and nothing imports it by name: no module
            if target in planned:
                self.findings.append(finding("PA121", f"the package already has a module {path}; the ops of "
                                             f"`{ext.module}` are not given one", file=target))
                continue
            functions = [f for f, _ in ext.inline_functions] or None
            bound = [op for op in ops if op.registered_by == "pybind11"]  # the module's functions
            self.change(target, python.alias_module(ext.module, bound, path.count("."), functions),
                        f"the former extension module `{ext.module}`: its functions, now torch ops")
            planned.add(target)
            modules.append((path, [op.name for op in bound]))
            for op in bound:
                access[op.name] = path
        if carried_init is not None:
            text = self.changes[carried_init].new
            additions = [f"from .{p.rpartition('.')[0]} import {p.rpartition('.')[2]}" for p, _ in modules
                         if not python.imports_module(text, p)]
            if not modules and not python.imports_module(text, python.OPS_MODULE) and \
                    not re.search(rf"^from \.{python.OPS_MODULE} import", text, re.M):
                additions.append(f"from . import {python.OPS_MODULE}  # noqa: F401  loads the kernel's library")
            additions += [f"from . import {w}" for w in wrapper_names if not re.search(
                rf"^\s*from\s+\.\s+import\s+.*\b{re.escape(w)}\b", text, re.M)]
            if additions:
                new = text.rstrip("\n") + f"\n\n# {MARKER}: the former extension module(s) and carried modules\n" + \
                    "\n".join(additions) + "\n"
                self.changes[carried_init] = FileChange(carried_init, new, self.changes[carried_init].old,
                                                        self.changes[carried_init].author,
                                                        self.changes[carried_init].what)
        else:
            init = f"{pkg_dir}/__init__.py"
            if init not in planned:
                self.change(init, python.generated_init(python_name, modules, wrapper_names + subpackages,
                                                                  [e.module for e in exts]),
                            "the package: the extension's functions at the top")
                for path, functions in modules:
                    if "." not in path:
                        for f in functions:
                            access[f] = ""
        return access

    def _free_names(self, inside: dict[str, str], main_pkg: PythonPackage | None) -> dict[str, str]:
        """Where each extension module lives in the package; a load() extension named like a module the package
        already carries (`knn = load(name="knn")` in pkg/knn.py) gets a free name beside it (`knn_ext`): nothing
        imports a load()-built module by its name, the load() site becomes an import of the new one."""
        if self.d.route != "load()":
            return inside
        taken = {PurePosixPath(w).stem for w in self.d.wrappers} | {p.name for p in self._subpackages}
        if main_pkg is not None:
            for rel in sources.walk(self.root / main_pkg.path, (".py",)):
                taken.add(PurePosixPath(rel).parts[0].removesuffix(".py"))
        out = {}
        for module, path in inside.items():
            if path in taken:
                path = next(c for c in (f"{path}_ext", f"_{path}_ext", *(f"_{path}_ext{i}" for i in range(2, 99)))
                            if c not in taken)
                self.notes.append(f"the load() module `{module}` is named like a module of the package: carried as "
                                  f"`{path}`")
            taken.add(path)
            out[module] = path
        return out

    def _carry_subpackages(self, pkg_dir: str, inside: dict[str, str], loads: dict[str, str],
                           planned: set[str]) -> list[str]:
        """The packages setup.py installs beside each other (self._subpackages), carried as subpackages of the
        kernel's package: relative imports between them hold as written, absolute ones (`from functions import
        X`, `import Ext`) become relative. Returns their names."""
        names = {pkg.name: pkg.name for pkg in self._subpackages}
        for pkg in self._subpackages:
            for rel in sources.walk(self.root / pkg.path, (".py",)):
                source = f"{pkg.path}/{rel}"
                target = f"{pkg_dir}/{pkg.name}/{rel}"
                text = self.original(source)
                if text is None:
                    continue
                depth = len(PurePosixPath(rel).parts)  # its folder, one below the kernel's package
                ctx = python.ImportContext({**inside, **names}, None, depth, frozenset(self._namespaces))
                new, problems = python.rewrite(text, source, ctx, loads, self._sites(source))
                self.findings += problems
                self.change(target, new, f"the installed package `{pkg.name}`, a subpackage of the kernel's"
                            + (", imports rewritten" if new != text else ""))
                planned.add(target)
        if self._subpackages:
            self.notes.append("setup.py installs " + ", ".join(p.name for p in self._subpackages) + ": carried as "
                              "subpackages of the kernel's package")
        return list(names)

    def _imported(self, ext: Extension, planned: set[str]) -> bool:
        """Whether a carried module imports the extension module by name (extension-cpp: `from . import _C`)."""
        leaf = re.escape(ext.leaf)
        pattern = re.compile(rf"^\s*(?:from\s+\S+\s+)?import\s+[^\n]*\b{leaf}\b|^\s*from\s+\S*\b{leaf}\s+import", re.M)
        return any(pattern.search(self.changes[t].new) for t in planned if t in self.changes)

    def _sites(self, rel: str) -> dict[int, str]:
        return {line: module for file, line, module in self.d.load_sites if file == rel}

    # --- tests --------------------------------------------------------------------------------

    def _tests(self, name: str, python_name: str, version: int, repo_id: str | None, backends: Sequence[str],
               ops: Sequence[Op], access: dict[str, str], exts: Sequence[Extension]) -> None:
        target = f"tests/test_{python_name}_ops.py"
        carried = {PurePosixPath(w).name for w in self.d.wrappers}
        found, left = project_tests.find(self.root, carried)
        own = [t for t in found if not written_by_adopt(self.read(t.source))]
        devices = tuple(dict.fromkeys(tests_gen.DEVICE_TYPES.get(b, b) for b in backends))
        repo = repo_id or f"your-hf-org/{name}"
        paths = {op.name: access.get(op.name, "") for op in ops}
        label = ", ".join(e.module for e in exts)
        mine = [t for t in own if not t.helper]
        ci_subset = not mine or any("kernels_ci" in (self.read(t.source) or "") for t in mine)
        replayed = self._replay(python_name, ops, devices, repo, version, paths, label, ci_subset,
                                python_name if mine else None)
        if mine:
            self._carry_tests(own, left, python_name)
            return
        if not ops or (self.root / target).exists():
            return  # written once: the author adjusts its inputs, and a rerun leaves them alone
        if repo_id is None:
            self.notes.append(f"the tests load {repo}: pass --repo ORG/NAME (or set [general.hub] repo-id and the "
                              "repo the tests load) before pushing")
        references = self._references(ops, access)
        rest = [op for op in ops if op.name not in replayed]
        derived = inputs.derive(self.root, rest, [e.module for e in exts], self._cpp_texts(exts)) if rest else {}
        self.change(target, tests_gen.test_file(repo_id=repo, version=version, devices=devices, paths=paths,
                                                module_label=label, ops=ops, references=references, derived=derived,
                                                replayed=replayed),
                    "tests: each op registered with its schema" + (
                        f"; {len(rest)} op(s) not recorded called on the inputs the project passes them ({len(derived)} "
                        "found in its code; the rest guessed from the C++ signature)" if rest else ""))
        guessed = [op.name for op in rest if op.name not in derived]
        if guessed:
            self.findings.append(finding(
                "PA192", f"no call in the project shows the inputs of {', '.join(guessed)}: their INPUTS in {target} "
                "are guessed from the C++ signature, and an op that refuses them is `untested` (needs inputs), "
                "not judged", file=target,
                hint="give each the shapes and dtypes it expects in INPUTS, or add tests of your own to tests/"))

    def _replay(self, python_name: str, ops: Sequence[Op], devices: Sequence[str], repo: str, version: int,
                paths: dict[str, str], label: str, ci_subset: bool, package: str | None) -> set[str]:
        """--record: the recorded calls kept with the tests and a test replaying them on the kernel; the ops so
        covered (their generated INPUTS are not written: the recorded calls replace the guess)."""
        recording = self.settings.recording
        if recording is None:
            return set()
        calls = replay_tests.calls_for(ops, recording.calls)
        recorded = f"{python_name}.json"
        failures = dict(recording.original_failures)
        if failures:
            shown = ", ".join(f"{n} ({how})" for n, how in list(failures.items())[:3])
            self.findings.append(finding(
                "PA197", f"--record: {len(failures)} of the project's tests fail with the original extension too: "
                f"{shown}{' ...' if len(failures) > 3 else ''}; `publisher test` does not hold them against the kernel",
                file=str(self.root)))
        if failures or calls:
            self.change(f"tests/{replay_tests.RECORDED_DIR}/{recorded}",
                        replay_tests.recorded_file(label=label, torch_device=recording.device, calls=calls,
                                                   original_failures=failures),
                        f"{len(calls)} call(s) the project's own code made into the original, recorded"
                        + (f"; {len(failures)} test(s) that fail with the original" if failures else ""))
        if not calls:
            why = recording.why_not or "no recorded call is of an op the kernel registers"
            self.findings.append(finding(
                "PA196", f"--record: nothing recorded to replay ({why}); the generated tests guess each op's inputs",
                file=str(self.root),
                hint="record where the original builds and runs (a machine with its device), with tests or scripts "
                     "that call its ops"))
            return set()
        sources = list(dict.fromkeys(c["from"] for c in calls))
        replayed = sorted({c["op"] for c in calls})
        self.change(f"tests/test_{python_name}_original.py",
                    replay_tests.test_file(repo_id=repo, version=version, devices=devices,
                                           paths={op: paths.get(op, "") for op in replayed}, label=label,
                                           recorded=recorded, sources=sources, ci_subset=ci_subset,
                                           package=package),
                    "tests: the recorded calls made again on the kernel, compared with what the original gave")
        self.findings.append(finding(
            "PA195", f"--record: {len(calls)} call(s) of {len(replayed)} op(s) into the original, recorded from "
            f"{', '.join(sources)}, are replayed on the kernel by tests/test_{python_name}_original.py", file=str(self.root)))
        return set(replayed)

    def _declare_test_depends(self, python_name: str, backends: Sequence[str]) -> None:
        """What the tests adopt leaves in tests/ import and nothing declares (check's PB409), declared in
        publisher.toml `test-depends`: `publisher test` installs it for the run, so adopt -> build -> test needs no
        hand step."""
        texts: dict[Path, str] = {}
        tests = self.root / "tests"
        for path in sorted(tests.rglob("*.py")) if tests.is_dir() else ():
            texts[path] = self.read(path.relative_to(self.root).as_posix()) or ""
        for rel, change in self.changes.items():
            if rel.startswith("tests/") and rel.endswith(".py"):
                texts[self.root / rel] = change.new
        needed = test_imports.undeclared_test_requirements(self.root, texts, python_name, [], list(backends))
        if not needed:
            return
        rel = settings_file.FILE_NAME
        old = self.read(rel)
        try:
            doc = tomlkit.parse(old) if old else tomlkit.document()
        except tomlkit.exceptions.ParseError as err:
            self.findings.append(finding(
                "PB501", f"{rel} cannot be read ({err}), so the tests' dependencies are not declared there: "
                f"{', '.join(needed)}", file=str(self.root / rel), hint="fix the TOML syntax, then adopt again"))
            return
        present = doc.get("test-depends")
        entries = tomlkit.array() if not isinstance(present, list) else present
        entries.extend(n for n in needed if n not in entries)
        doc["test-depends"] = entries
        self.change(rel, tomlkit.dumps(doc), f"test-depends: {', '.join(needed)} (what the tests import besides torch "
                                             "and kernels; `publisher test` installs it for the run)")
        self.findings.append(finding(
            "PA194", f"the tests import {', '.join(needed)}, which nothing declared: declared in {rel} test-depends",
            file=str(self.root / rel)))

    def _cpp_texts(self, exts: Sequence[Extension]) -> dict[str, str]:
        """The extensions' C++ as the author wrote it (sources and the project headers they include)."""
        texts = {path: text for e in exts for path, text in e.inline_sources}
        for ext in exts:
            for rel in [*ext.sources, *sources.project_headers(self.root, ext.sources, ext.include_dirs)]:
                text = self.original(rel)
                if text is not None and rel not in texts:
                    texts[rel] = text
        return texts

    def _carry_tests(self, tests: Sequence[project_tests.ProjectTest], left: Sequence[str], python_name: str) -> None:
        """The project's own tests stay its tests: `publisher test` runs them against each built variant, which
        it puts first on the path as the package `python_name`. Those outside tests/ (test/, test modules beside
        setup.py and the modules they import) are carried into tests/, where kernel-builder's CI and `publisher
        test` look. Their imports of the former extension module(s), of the package's old name and of modules
        carried into the package are pointed at the kernel's package; tests that reach the kernel neither that
        way nor through kernels.get_kernel are a finding."""
        moved = {**self._moved, **{PurePosixPath(w).stem: f"{python_name}.{PurePosixPath(w).stem}"
                                   for w in self.d.wrappers}}
        reaches = False
        for test in tests:
            text = self.original(test.source) or ""
            new = python.rewrite_tests(text, test.target, moved, frozenset(self._namespaces), python_name) \
                if test.target.endswith(".py") and (moved or self._namespaces) else text
            if new != text or test.source != test.target:
                where = "" if test.source == test.target else f", carried from {test.source} into tests/ (where " \
                    "`publisher test` and kernel-builder's CI run `pytest tests`)"
                what = "a module the project's tests import" if test.helper else "the project's test"
                self.change(test.target, new, what + where + (", its imports of the extension pointed at the "
                                                               "kernel's package" if new != text else ""))
            reaches = reaches or (not test.helper and python.imports_package(new, python_name))
        outside = sorted({t.source for t in tests if t.source != t.target and not t.helper})
        if outside:
            self.findings.append(finding(
                "PA191", f"the project's tests {', '.join(outside[:4])}{' ...' if len(outside) > 4 else ''} are "
                "carried into tests/: `publisher test` runs them against each built variant", file=outside[0]))
        if left:
            self.findings.append(finding(
                "PA193", f"{len(left)} file(s) of test/ are not text and not carried into tests/: "
                f"{', '.join(left[:3])}{' ...' if len(left) > 3 else ''}", file=left[0],
                hint="copy them into tests/ by hand if the tests read them"))
        if not reaches:
            self.findings.append(finding(
                "PA121", f"tests/ neither imports {python_name} nor loads the kernel through kernels.get_kernel: "
                "`publisher test` runs them against each built variant, and these test none",
                file=str(self.root / "tests"),
                hint=f"import the kernel's package (`import {python_name}`: publisher test puts each variant first on "
                     "the path under that name), or load it as users do: kernels.get_kernel(\"<org>/<name>\", "
                     "version=<N>, trust_remote_code=[\"<org>/<name>\"])"))

    def _references(self, ops: Sequence[Op], access: dict[str, str]) -> dict[str, str]:
        """op -> expression of a Python reference implementation in the carried package, by name."""
        patterns = facts()["reference_patterns"]
        found: dict[str, str] = {}
        modules: dict[str, set[str]] = {}
        for rel, change in self.changes.items():
            if not rel.endswith(".py") or not rel.startswith("torch-ext/"):
                continue
            try:
                tree = ast.parse(change.new)
            except SyntaxError:
                continue
            module = ".".join(PurePosixPath(rel).with_suffix("").parts[2:])
            module = "" if module == "__init__" else module.removesuffix(".__init__")
            modules[module] = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        for op in ops:
            for pattern in patterns:
                candidate = pattern.format(op=op.name)
                for module, names in sorted(modules.items()):
                    if candidate in names:
                        found[op.name] = "kernel" + "".join(f".{p}" for p in module.split(".") if p) + f".{candidate}"
                        break
                if op.name in found:
                    break
        return found

    # --- the build.toml route -------------------------------------------------------------------

    def layout(self) -> AdoptPlan:
        from publisher.project.migrate import migrate_text

        d = self.d
        text = d.layout_toml or ""
        data = tomllib.loads(text)
        general = data.get("general") or {}
        old_python = (d.existing.name or "").replace("-", "_")
        name = naming.choose_name(d, self.settings.name, old_python or None)
        python_name = name.value.replace("-", "_")
        self.notes.append(f"name {name.value} (from {name.source}); Python package {python_name}")
        license_, version = self._license_version()
        backends = tuple(b for b in general.get("backends") or [] if isinstance(b, str)) or ("cuda",)
        torch_src = [s for s in (data.get("torch") or {}).get("src") or [] if isinstance(s, str)]
        all_src = list(d.extensions[0].sources)
        defs_path = self._defs_path(all_src)
        bindings_found: list[binding.Binding] = []
        torch_flags = [f for f in (data.get("torch") or {}).get("cxx-flags") or [] if isinstance(f, str)]
        defines = (*_flag_defines(torch_flags), "Py_LIMITED_API")
        includes = list(d.extensions[0].include_dirs)
        for src in torch_src:
            if src == defs_path or not src.endswith(TRANSLATION_UNITS):
                continue
            src_text = self.original(src)
            if src_text is None or not binding.has_module(src_text):
                continue
            found = binding.read_binding(src, src_text, self.lookup(src, src_text, includes), defines)
            if found is not None:
                bindings_found.append(found)
                self.findings += found.findings
        if not bindings_found:
            raise ProjectError(f"{self.root / 'build.toml'}: no [torch] source holds a PYBIND11_MODULE: nothing to port",
                               "run `publisher check` on the project; `publisher migrate` upgrades an old build.toml")
        ops = [op for b in bindings_found for op in b.ops]
        for b in bindings_found:
            self.change(b.file, binding.port_binding(b, backends, defs_path),
                        f"the pybind11 module guarded; {len(b.ops)} op kernel(s) registered beside it")
        ported = {b.file for b in bindings_found}
        units = [s for s in all_src if s.endswith(TRANSLATION_UNITS) and s != defs_path]
        for rel in [*units, *sources.project_headers(self.root, units, includes)]:
            if rel in ported:
                continue
            original = self.original(rel)
            if original is None:
                continue
            guarded = binding.guard_includes(original)
            if guarded != original or self.read(rel) != original:
                self.change(rel, guarded, "pybind11 includes guarded (they do not compile against the limited API)")
        self.change(defs_path, binding.defs_file_text(ops, f"{old_python}._ops", sorted(ported)),
                    f"the torch ops ({len(ops)}) that replace the pybind11 module")
        try:
            migrated, _, _ = migrate_text(text, data, license=license_, version=version)
        except ProjectError as err:
            raise ProjectError(f"{self.root / 'build.toml'}: {err.message}", err.hint) from None
        new_src = [s for s in torch_src if s != defs_path] + [defs_path]
        repo_id = self.settings.repo_id or d.existing.repo_id
        self.change("build.toml", buildtoml.edit_layout(migrated, name=name.value, torch_src=new_src, repo_id=repo_id),
                    "build.toml: edition 5, a kernel name, the ported binding")
        access = self._layout_python(old_python, python_name)
        access.update({op.name: "_ops.ops" for op in ops if op.name not in access})
        self._tests(name.value, python_name, version, repo_id, backends, _testable(ops), access, d.extensions)
        self._port_removed_python()
        self._declare_test_depends(python_name, backends)
        return AdoptPlan(d, name.value, python_name, backends, tuple(ops), tuple(self.changes.values()),
                         tuple(self.findings), tuple(self.notes))

    def _layout_python(self, old_python: str, python_name: str) -> dict[str, str]:
        old_dir = f"torch-ext/{old_python}"
        new_dir = f"torch-ext/{python_name}"
        if not (self.root / old_dir / "__init__.py").is_file():
            return {}
        extensions = {f"{old_python}._ops": python.OPS_MODULE}
        if old_python != python_name:
            self._moved = {old_python: python_name}
        for rel in sources.walk(self.root / old_dir, (".py",)):
            if PurePosixPath(rel).name == "_ops.py":
                continue
            source, target = f"{old_dir}/{rel}", f"{new_dir}/{rel}"
            text = self.original(source) or ""
            ctx = python.ImportContext(extensions, old_python, len(PurePosixPath(rel).parts) - 1)
            new, problems = python.rewrite(text, source, ctx, {})
            self.findings += problems
            if new != text or source != target:
                self.change(target, new, "the package's own module, imports rewritten"
                            + ("" if source == target else f" (from {source})"))
        return {}


def _testable(ops: Sequence[Op]) -> list[Op]:
    """The ops the written tests can call by name with inputs of known types: a known schema, the default
    overload (`ops.foo`, not `ops.foo.out`)."""
    return [op for op in ops if op.known and not op.overload]


@cache
def _matrix_torch_versions() -> tuple[str, ...]:
    """The torch releases of publisher's default matrix (what a removed API must compile with)."""
    from publisher.plan.matrix import load_matrix

    return tuple(sorted({cell.torch for cell in load_matrix().cells}))


def _outdated(capabilities: Sequence[str]) -> list[str]:
    """The capabilities no CUDA toolkit of publisher's matrix compiles (3.7, 5.0, 6.1 ...)."""
    from publisher.project.load import matrix_toolkits

    cuda, _ = matrix_toolkits(None)
    built = {re.sub(r"[af]?(\+PTX)?$", "", c) for caps in cuda.values() for c in caps}
    return [c for c in capabilities if re.sub(r"[af]?(\+PTX)?$", "", c) not in built]


def _macro_names(defines: Sequence[str]) -> list[str]:
    return [d.split("=", 1)[0] for d in defines]


def reached_includes(text: str, defines: Collection[str]) -> list[tuple[int, str, str]]:
    """(line, quote, header) of each #include a compile with `defines` (macro names) reaches: outside
    conditionals, or where they hold, or where they cannot be told (taken as reached)."""
    known = set(defines)
    conditions: list[bool | None] = []
    out = []
    for number, line in enumerate(cxx.mask(text, strings=False).splitlines(), 1):
        stripped = line.strip()
        if not stripped.startswith("#"):
            continue
        binding._directive(stripped, conditions, known)
        m = re.match(r'#\s*include\s*([<"])([^>"]+)[>"]', stripped)
        if m and all(c is not False for c in conditions):
            out.append((number, m.group(1), m.group(2)))
    return out


def cuda_include(root: Path, units: Sequence[str], include_dirs: Sequence[str],
                 defines: Collection[str]) -> tuple[str, int, str] | None:
    """The first #include of a header only a CUDA toolkit provides (resources/adopt.yaml) that a compile of
    `units` with `defines` reaches, through the project headers it reaches: (file, line, header)."""
    prefixes = tuple(facts()["cuda_only_headers"])
    queue, seen = list(units), set(units)
    while queue:
        rel = queue.pop(0)
        text = sources.read_text(root / rel)
        for line, quote, header in reached_includes(text or "", defines):
            if header.startswith(prefixes):
                return rel, line, header
            candidates = [str(PurePosixPath(rel).parent / header)] if quote == '"' else []
            for candidate in candidates + [str(PurePosixPath(d) / header) for d in include_dirs]:
                found = sources.relative(root, candidate)
                if found and (root / found).is_file():
                    if found not in seen:
                        seen.add(found)
                        queue.append(found)
                    break
    return None


def _flag_defines(flags_: Sequence[str]) -> list[str]:
    out = []
    words = list(flags_)
    for i, word in enumerate(words):
        if word.startswith("-D") and len(word) > 2:
            out.append(word[2:])
        elif word == "-D" and i + 1 < len(words):
            out.append(words[i + 1])
    return out


def _c_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
