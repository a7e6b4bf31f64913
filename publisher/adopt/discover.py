"""Find the extension a project builds, and the Python code around it:
setup.py (read statically where the interpreter can follow it, else run with
recorders in a scratch copy), `load(...)` / `load_inline(...)` calls in its
Python files, or a kernel-builder-ish layout (build.toml and a pybind11
binding, the shape coding agents write)."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import replace
from functools import cache
from pathlib import Path, PurePosixPath

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from publisher import runner
from publisher.adopt import sources
from publisher.adopt.evaluate import Call, Evaluator, NeedsExecution, Unknown
from publisher.adopt.model import MARKER, Discovery, Existing, Extension, PythonPackage
from publisher.codes import finding
from publisher.data import read_yaml
from publisher.errors import ProjectError, UsageError
from publisher.findings import Finding

RECORDER = Path(__file__).with_name("record_setup.py")
EXEC_TIMEOUT = 120.0  # seconds a setup.py may take to declare its extensions
COPY_LIMIT = 512 * 1024 * 1024  # bytes of project copied into the scratch folder a setup.py runs in
GPU_SUFFIXES = (".cu", ".cuh")  # sources only a CUDA build compiles
_ROUTE = re.compile(r"^# .*" + re.escape(MARKER) + r" \(from (setup\.py|load\(\)|build\.toml)\)", re.M)


@cache
def facts() -> dict:
    return read_yaml("adopt.yaml")


def discover(root: Path) -> Discovery:
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root}: not a folder", "pass the folder of the extension project (the one holding setup.py)")
    existing, toml_text = _existing(root)
    route = _ROUTE.search(toml_text).group(1) if toml_text and _ROUTE.search(toml_text) else None
    if route == "build.toml" or (route is None and toml_text is not None):
        return _from_layout(root, existing, toml_text or "")
    if route == "setup.py" or (route is None and (root / "setup.py").is_file()):
        if (root / "setup.py").is_file():
            if route != "setup.py" and not _declares_extensions(root):
                found = _from_load_calls(root, existing)  # a setup.py that packages a package calling load()
                if found is not None:
                    return found
            return _from_setup(root, existing)
    found = _from_load_calls(root, existing)
    if found is not None:
        return found
    nested = [p for p in sources.walk(root, ("setup.py",)) if "/" in p]
    if nested:
        listed = ", ".join(str(Path(p).parent) for p in nested[:8])
        raise ProjectError(f"{root}: no extension at the top of this folder; setup.py files below it: {listed}",
                           "adopt one extension project at a time: pass the folder holding its setup.py")
    raise ProjectError(f"{root}: no torch extension found (no setup.py, no torch.utils.cpp_extension load() call, "
                       "no build.toml)",
                       "pass the folder of a torch.utils.cpp_extension project (setup.py with CUDAExtension or "
                       "CppExtension, or a script calling load())")


def _declares_extensions(root: Path) -> bool:
    """Whether setup.py may build a torch extension at all (it names one of torch's extension classes, or
    passes ext_modules): a setup.py that only packages Python code leaves the extension to load() calls
    (KNN_CUDA's package builds itself with load() on import)."""
    text = sources.read_text(root / "setup.py") or ""
    return bool(re.search(r"\b(CUDAExtension|CppExtension|ext_modules)\b", text))


# --- an existing build.toml ---------------------------------------------------------------------

def _existing(root: Path) -> tuple[Existing, str | None]:
    text = sources.read_text(root / "build.toml")
    if text is None:
        return Existing(), None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ProjectError(f"{root / 'build.toml'}: not valid TOML ({err})", "fix the file, or move it aside") from None
    general = data.get("general") if isinstance(data.get("general"), dict) else {}
    hub = general.get("hub") if isinstance(general.get("hub"), dict) else {}
    version = general.get("version")
    return Existing(
        name=general.get("name") if isinstance(general.get("name"), str) else None,
        version=version if isinstance(version, int) and not isinstance(version, bool) else None,
        license=general.get("license") if isinstance(general.get("license"), str) else None,
        repo_id=hub.get("repo-id") if isinstance(hub.get("repo-id"), str) else None,
        written_by_adopt=bool(_ROUTE.search(text)),
    ), text


# --- setup.py -------------------------------------------------------------------------------------

def read_setup(root: Path) -> Discovery:
    """What the project's setup.py builds, whatever else the folder holds (a build.toml of its own)."""
    return _from_setup(Path(root), Existing())


def read_load_calls(root: Path) -> Discovery | None:
    """The load()/load_inline() calls of the project's Python files, or None."""
    return _from_load_calls(Path(root), Existing())


def _from_setup(root: Path, existing: Existing) -> Discovery:
    scratch = Path(tempfile.mkdtemp(prefix="publisher-adopt-"))
    try:
        return _read_setup(root, existing, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _read_setup(root: Path, existing: Existing, scratch: Path) -> Discovery:
    script = root / "setup.py"
    text = sources.read_text(script)
    if text is None:
        raise ProjectError(f"{script}: cannot be read", "check the file's permissions")
    findings: list[Finding] = []
    try:
        tree = ast.parse(text, filename=str(script))
    except SyntaxError as err:
        raise ProjectError(f"{script}:{err.lineno}: not valid Python ({err.msg})",
                           "fix the syntax error first (or run publisher adopt with the Python the script is for)") from None
    evaluator = Evaluator(root=root, script=script.resolve())
    refusals: list[tuple[str, int | None]] = []  # calls the recorders refused (an executed script only)
    try:
        evaluator.run_module(tree)
        setup_calls = [c for c in evaluator.calls if c.kind == "setup"]
        if not setup_calls:
            raise NeedsExecution("setup() is not called where the reader can see it", None)
        call = setup_calls[-1]
        for key in ("ext_modules", "packages", "package_dir"):
            if isinstance(call.kwargs.get(key), Unknown):
                raise NeedsExecution(call.kwargs[key].reason, call.kwargs[key].line)
        records = [_ext_record(c) for c in call.kwargs.get("ext_modules") or [] if isinstance(c, Call)]
        if not records:  # what the script computes at run time may hold one (a branch taken on what it runs)
            raise NeedsExecution("no extension in ext_modules as read", call.line if hasattr(call, "line") else None)
        setup_name = call.kwargs.get("name") if isinstance(call.kwargs.get("name"), str) else None
        packages = call.kwargs.get("packages") or []
        package_dir = call.kwargs.get("package_dir") or {}
        environ = dict(evaluator.environ)
        how = "static"
        base = root.resolve()
    except NeedsExecution as err:
        where = f" (line {err.line})" if err.line else ""
        recorded, base = _execute(root, scratch)
        findings.append(finding("PA103", f"setup.py was run with recorders: reading it statically stopped at "
                                f"{err.reason}{where}", file=str(script), line=err.line,
                                hint="nothing was compiled, installed or downloaded: setup(), the extension classes "
                                     "and subprocesses were replaced; torch.cuda.is_available() answered True"))
        refusals = _refusals(recorded)
        for what, line in refusals:
            findings.append(finding("PA104", f"setup.py tried {what}; refused", file=str(script), line=line))
        asked = list(dict.fromkeys(recorded.get("git") or []))  # run() and Popen under it: one command
        if asked:
            findings.append(finding("PA109", f"setup.py asked git ({'; '.join(f'`{c}`' for c in asked[:4])}): answered "
                                    "from the project's repository, as where its author runs it", file=str(script)))
        answered = recorded.get("answered") or []
        if answered:
            findings.append(finding("PA105", "no CUDA toolkit here: setup.py was answered as on a machine with CUDA "
                                    f"{facts()['recorded_cuda_version']} ({'; '.join(answered)})", file=str(script),
                                    hint="what the script decides from the toolkit's version (flags, architectures) "
                                         "is recorded for that version"))
        if recorded.get("error"):
            raise SetupNotRun(f"{script}: running it with recorders failed", _setup_failure(root, base, recorded)) \
                from None
        setup = recorded.get("setup")
        if not setup:
            raise ProjectError(f"{script}: ran, but never called setup()", "call setuptools.setup(...)") from None
        records = [(r["kind"], r["name"], r["sources"], r["kwargs"], r.get("line")) for r in setup["ext_modules"]]
        for other in setup.get("other_ext_modules") or []:
            findings.append(finding("PA101", f"setup.py builds an extension that is not a torch one ({other}); left "
                                    "out", file=str(script)))
        setup_name = setup.get("name") if isinstance(setup.get("name"), str) else None
        packages = setup.get("packages") or []
        package_dir = setup.get("package_dir") or {}
        environ = recorded.get("environ") or {}
        how = "executed"
    extensions: list[Extension] = []
    for kind, name, srcs, kwargs, line in records:
        ext, problems = _extension(root, base, kind, name, srcs, kwargs, "setup.py", line, base)
        findings += problems
        if ext is not None:
            extensions.append(ext)
    if not extensions and how == "executed" and refusals:
        what, line = refusals[0]
        raise ProjectError(f"{script}{f':{line}' if line else ''}: run with recorders, it declared no extension "
                           f"after publisher refused {what}: that refusal is the likely cause",
                           "make setup.py declare its extensions without running that command (publisher adopt "
                           "answers only git's read-only commands, from the project's repository)")
    if not extensions:
        raise ProjectError(f"{script}: declares no CUDAExtension or CppExtension",
                           "publisher adopt ports torch.utils.cpp_extension extensions")
    if how == "executed" and any(e.backend == "cuda" for e in extensions):
        extensions, found = _with_cpu_builds(root, extensions, scratch / "without-cuda")
        findings += found
    return Discovery(root=root, route="setup.py", how=how, extensions=tuple(extensions),
                     packages=_packages(root, packages, package_dir), wrappers=_wrappers(root, extensions),
                     setup_name=setup_name, arch_list=_arch_list(environ), existing=existing,
                     findings=tuple(findings))


def _with_cpu_builds(root: Path, extensions: list[Extension], scratch: Path) -> tuple[list[Extension], list[Finding]]:
    """The CUDA extensions the script builds on a machine without CUDA as well (extension-cpp: a CppExtension of
    its .cpp files where no GPU answers, a CUDAExtension of those and its .cu files where one does): each gets
    that build as its `cpu_build`, so the kernel has a cpu backend too, as the project had. Only where the two
    builds are one module whose CPU sources are the CUDA build's without its GPU files; a script that stops or
    builds something else without CUDA keeps its CUDA build only."""
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        recorded, base = _execute(root, scratch, without_cuda=True)
    except SetupNotRun:
        return extensions, []
    setup = recorded.get("setup") if not recorded.get("error") else None
    if not setup:
        return extensions, []
    cpu: dict[str, Extension] = {}
    for r in setup["ext_modules"]:
        ext, _ = _extension(root, base, r["kind"], r["name"], r["sources"], r["kwargs"], "setup.py", r.get("line"),
                            base)
        if ext is not None and ext.backend == "cpu":
            cpu[ext.module] = ext
    out, findings = [], []
    for ext in extensions:
        twin = cpu.get(ext.module)
        gpu_only = set(ext.sources) - set(twin.sources) if twin is not None else set()
        if (ext.backend == "cuda" and twin is not None and twin.sources and set(twin.sources) <= set(ext.sources)
                and all(PurePosixPath(s).suffix in GPU_SUFFIXES for s in gpu_only)):
            out.append(replace(ext, cpu_build=twin))
            findings.append(finding(
                "PA108", f"setup.py builds `{ext.module}` without CUDA too (a CppExtension of {len(twin.sources)} of "
                f"its {len(ext.sources)} sources, where no GPU answers): the kernel gets a cpu backend beside cuda",
                file=str(root / "setup.py"), line=twin.line,
                hint="for a CUDA-only kernel, take `cpu` out of [general] backends and drop its `_cpu` kernel table in "
                     "build.toml"))
        else:
            out.append(ext)
    return out, findings


def _ext_record(call: Call) -> tuple:
    args = list(call.args)
    name = call.kwargs.get("name", args[0] if args else None)
    srcs = call.kwargs.get("sources", args[1] if len(args) > 1 else [])
    kwargs = {k: v for k, v in call.kwargs.items() if k not in ("name", "sources")}
    return call.kind, name, srcs, kwargs, call.line


class SetupNotRun(ProjectError):
    """setup.py could not be run with recorders; `findings` say where and what it needed (PA106, PA107)."""

    def __init__(self, message: str, findings: list[Finding]):
        super().__init__(message)
        self.findings = tuple(findings)


def _execute(root: Path, scratch: Path, *, without_cuda: bool = False) -> tuple[dict, Path]:
    """Run setup.py with recorders in a copy of the project under `scratch`; (records, the copy's root).
    The recorder runs from a folder of its own: python puts a script's folder first on sys.path, and a file
    beside the recorder named like a standard-library module would shadow that module. `without_cuda`: the
    script answered as on a machine without CUDA (what it builds for a cpu backend)."""
    copy = scratch / "project"
    copy_project(root, copy)
    recorder = scratch / "recorder" / RECORDER.name
    recorder.parent.mkdir()
    shutil.copyfile(RECORDER, recorder)
    out = scratch / "records.json"
    env = dict(os.environ)
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "FORCE_CUDA": "1", "PIP_NO_INDEX": "1",
                "no_proxy": "", "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
                **_repository(root)})
    command = [sys.executable, str(recorder), str(out), "setup.py", str(facts()["recorded_cuda_version"])]
    if without_cuda:
        env.pop("FORCE_CUDA")
        command.append("cpu")
    result = runner.run(command, cwd=copy, env=env, timeout=EXEC_TIMEOUT)
    if result.timed_out:
        raise SetupNotRun(f"{root / 'setup.py'}: still running after {int(EXEC_TIMEOUT)} s with recorders", [finding(
            "PA106", f"setup.py was still running after {int(EXEC_TIMEOUT)} s with recorders (nothing is compiled "
            "there: it works at import time)", file=str(root / "setup.py"),
            hint="make setup.py declare its extensions without long work at import time")])
    try:
        records = json.loads(out.read_text())
    except (OSError, ValueError):
        tail = result.output.strip().splitlines()[-3:]
        raise SetupNotRun(f"{root / 'setup.py'}: running it with recorders gave no answer", [finding(
            "PA106", f"setup.py could not be run with recorders by {sys.executable}"
            + (f" ({' / '.join(tail)})" if tail else ""), file=str(root / "setup.py"),
            hint="run `python setup.py --help` with that Python to see whether it starts at all")]) from None
    return records, copy.resolve()


def _repository(root: Path) -> dict[str, str]:
    """Where the recorder answers git from: the repository holding the project (its .git folder, or the folder
    a `.git` file of a worktree or submodule names) and its work tree; nothing outside one."""
    for folder in (root.resolve(), *root.resolve().parents):
        marker = folder / ".git"
        if marker.is_dir():
            return {"PUBLISHER_ADOPT_GIT_DIR": str(marker), "PUBLISHER_ADOPT_GIT_WORK_TREE": str(folder)}
        if marker.is_file():
            text = sources.read_text(marker) or ""
            named = text.strip().removeprefix("gitdir:").strip() if text.startswith("gitdir:") else ""
            if named:
                return {"PUBLISHER_ADOPT_GIT_DIR": str((folder / named).resolve()),
                        "PUBLISHER_ADOPT_GIT_WORK_TREE": str(folder)}
            return {}
    return {}


def _refusals(recorded: dict) -> list[tuple[str, int | None]]:
    """(what setup.py tried, its line) for each call the recorders refused."""
    out = []
    for entry in recorded.get("blocked") or []:
        if isinstance(entry, dict):
            out.append((str(entry.get("what")), entry.get("line") if isinstance(entry.get("line"), int) else None))
    return out


def _setup_failure(root: Path, copy: Path, recorded: dict) -> list[Finding]:
    """What setup.py needed, where it stopped: a module it imports that this Python lacks, a project file
    shadowing a standard-library module, or the error itself."""
    script = str(root / "setup.py")
    line = recorded.get("error_line")
    missing = recorded.get("missing")
    module_file = recorded.get("module_file") or ""
    out: list[Finding] = []
    shadows = sorted(p.name for p in root.iterdir() if (p.suffix == ".py" and p.stem in _stdlib_names()
                     or p.is_dir() and p.name in _stdlib_names() and (p / "__init__.py").is_file()))
    for name in shadows:
        out.append(finding("PA107", f"{name} has the name of the standard-library module `{Path(name).stem}`: where "
                           "setup.py runs, its folder is first on sys.path, and this file is imported in its place",
                           file=str(root / name), hint="rename it (and its imports)"))
    if missing and not module_file.startswith(str(copy)):
        out.append(finding("PA106", f"setup.py needs the module `{missing}`, which the Python running publisher "
                           f"({sys.executable}) does not have ({recorded['error']})", file=script, line=line,
                           hint=f"install what provides `{missing}` into that Python, or run publisher from the "
                                "environment the project builds in"))
    else:
        out.append(finding("PA106", f"setup.py failed when run with recorders: {recorded['error']}", file=script,
                           line=line, hint="make setup.py declare its extensions without building anything (or "
                                           "name the sources in a build.toml by hand)"))
    return out


def _stdlib_names() -> frozenset[str]:
    return frozenset(getattr(sys, "stdlib_module_names", ())) - {"__future__"}


def copy_project(root: Path, dest: Path) -> None:
    """The project as its own scripts see it, in a scratch folder: without VCS, build and environment folders,
    COPY_LIMIT bytes at most."""
    total = 0

    def ignore(folder: str, names: list[str]) -> set[str]:
        nonlocal total
        skipped = {n for n in names if n in sources.SKIP_DIRS or n.endswith(".egg-info")}
        for n in names:
            path = Path(folder) / n
            if n not in skipped and path.is_file() and not path.is_symlink():
                size = path.stat().st_size
                if total + size > COPY_LIMIT:
                    skipped.add(n)
                else:
                    total += size
        return skipped

    shutil.copytree(root, dest, symlinks=True, ignore=ignore)


def _packages(root: Path, packages, package_dir) -> tuple[PythonPackage, ...]:
    if not isinstance(packages, (list, tuple)) or not isinstance(package_dir, dict):
        return ()
    out = []
    for name in packages:
        if not isinstance(name, str) or "." in name:
            continue
        if name in package_dir:
            folder = str(package_dir[name])
        elif "" in package_dir:
            folder = f"{package_dir['']}/{name}"
        else:
            folder = name
        rel = sources.relative(root, folder)
        if rel and (root / rel / "__init__.py").is_file():
            out.append(PythonPackage(name, rel))
    return tuple(out)


# --- load() / load_inline() -------------------------------------------------------------------------

def _from_load_calls(root: Path, existing: Existing) -> Discovery | None:
    found: list[tuple[str, Call]] = []
    for rel in sources.walk(root, (".py",)):
        text = sources.read_text(root / rel)
        if text is None or "load" not in text or "cpp_extension" not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        script = (root / rel).resolve()
        evaluator = Evaluator(root=script.parent, script=script)
        try:
            evaluator.run_module(tree)
        except NeedsExecution as err:
            raise ProjectError(f"{root / rel}:{err.line or ''}: a load() call adopt cannot read: {err.reason}",
                               "give load() literal names, sources and flags (os.path.join and glob are fine)") from None
        for call in evaluator.calls:
            if call.kind in ("load", "load_inline"):
                found.append((rel, call))
    if not found:
        return None
    found.sort(key=lambda item: (_is_script(item[0]), item[0]))  # modules before scripts and tests
    findings: list[Finding] = []
    extensions: dict[str, Extension] = {}
    base = root.resolve()
    for rel, call in found:
        ext, problems = _load_extension(root, base, rel, call)
        findings += problems
        if ext is not None and ext.module not in extensions:
            extensions[ext.module] = ext
    if not extensions:
        raise ProjectError(f"{root}: the load() calls found declare no extension adopt can port",
                           "see the findings above")
    exts = tuple(extensions.values())
    sites = []
    for rel, call in found:
        name = call.kwargs.get("name", call.args[0] if call.args else None)
        if call.assigned_line is not None and name in extensions:
            sites.append((rel, call.assigned_line, name))
    return Discovery(root=root, route="load()", how="static", extensions=exts, wrappers=_wrappers(root, exts),
                     packages=_load_packages(root, [rel for rel, _ in found if not _is_script(rel)]),
                     load_sites=tuple(sites), existing=existing, findings=tuple(findings))


def _load_packages(root: Path, files: list[str]) -> tuple[PythonPackage, ...]:
    """The packages whose modules call load() (KNN_CUDA: knn_cuda/__init__.py builds its extension on import):
    the project's Python API, carried whole. Their outermost folder holding an __init__.py."""
    out: dict[str, PythonPackage] = {}
    for rel in files:
        parts = Path(rel).parts[:-1]
        top = None
        for i in range(len(parts)):
            if (root.joinpath(*parts[:i + 1]) / "__init__.py").is_file():
                top = parts[:i + 1]
                break
        if top and re.fullmatch(r"[A-Za-z_]\w*", top[-1]):
            path = "/".join(top)
            out.setdefault(path, PythonPackage(top[-1], path))
    return tuple(out.values())


def _load_extension(root: Path, base: Path, rel: str, call: Call) -> tuple[Extension | None, list[Finding]]:
    args = list(call.args)
    kw = call.kwargs
    name = kw.get("name", args[0] if args else None)
    if call.kind == "load":
        srcs = kw.get("sources", args[1] if len(args) > 1 else [])
        srcs = [srcs] if isinstance(srcs, str) else list(srcs or [])
        script_dir = (root / rel).parent.resolve()
        resolved = []
        for s in srcs:
            s = str(s)
            candidates = [Path(s)] if os.path.isabs(s) else [script_dir / s, base / s]
            resolved.append(str(next((c for c in candidates if c.is_file()), candidates[0])))
        kwargs = {"include_dirs": kw.get("extra_include_paths") or [],
                  "extra_compile_args": {"cxx": kw.get("extra_cflags") or [], "nvcc": kw.get("extra_cuda_cflags") or []},
                  "extra_link_args": kw.get("extra_ldflags") or []}
        kind = "cuda" if kw.get("with_cuda") or any(str(s).endswith((".cu", ".cuh")) for s in resolved) else "cpp"
        if kw.get("is_python_module") is False:
            return None, [finding("PA101", f"load(name={name!r}) builds a library of torch ops, not a pybind11 module "
                                  "(is_python_module=False)", file=rel, line=call.line,
                                  hint="register its ops with TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ...) in a "
                                       "kernel-builder project by hand")]
        return _extension(root, base, kind, name, resolved, kwargs, rel, call.line, base)
    return _inline_extension(root, base, rel, call, name)


def _inline_extension(root: Path, base: Path, rel: str, call: Call, name) -> tuple[Extension | None, list[Finding]]:
    """load_inline: the sources are strings; they are written to csrc/<name>/ beside the script's folder,
    with the includes load_inline adds in front of them, and bound as load_inline binds `functions`."""
    kw = call.kwargs
    args = list(call.args)
    cpp_sources = kw.get("cpp_sources", args[1] if len(args) > 1 else [])
    cuda_sources = kw.get("cuda_sources", args[2] if len(args) > 2 else None) or []
    functions = kw.get("functions", args[3] if len(args) > 3 else None)
    cpp_sources = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources or [])
    cuda_sources = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources or [])
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_]\w*", name):
        return None, [finding("PA101", f"load_inline name {name!r} is not an identifier", file=rel, line=call.line)]
    if functions is None:
        return None, [finding("PA111", f"load_inline(name={name!r}) without functions= binds nothing adopt can read "
                              "(its cpp_sources hold their own PYBIND11_MODULE)", file=rel, line=call.line,
                              hint="list the functions to bind with functions=[...]")]
    if isinstance(functions, str):
        functions = [functions]
    bound = list(functions.items()) if isinstance(functions, dict) else [(f, None) for f in functions]
    folder = f"csrc/{name}"
    written: list[tuple[str, str]] = []
    cpp_text = "#include <torch/all.h>\n\n" + "\n".join(cpp_sources) + "\n"
    written.append((f"{folder}/{name}.cpp", cpp_text))
    srcs = [f"{folder}/{name}.cpp"]
    if cuda_sources:
        cuda_text = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n\n" + "\n".join(cuda_sources) + "\n"
        written.append((f"{folder}/{name}_cuda.cu", cuda_text))
        srcs.append(f"{folder}/{name}_cuda.cu")
    kwargs = {"include_dirs": kw.get("extra_include_paths") or [],
              "extra_compile_args": {"cxx": kw.get("extra_cflags") or [], "nvcc": kw.get("extra_cuda_cflags") or []},
              "extra_link_args": kw.get("extra_ldflags") or []}
    kind = "cuda" if cuda_sources or kw.get("with_cuda") else "cpp"
    ext, problems = _extension(root, base, kind, name, [str(base / s) for s in srcs], kwargs, rel, call.line, base,
                               must_exist=False)
    if ext is None:
        return None, problems
    from dataclasses import replace

    return replace(ext, inline_sources=tuple(written), inline_functions=tuple((str(f), d) for f, d in bound)), problems


def _is_script(rel: str) -> bool:
    name = Path(rel).name
    parts = Path(rel).parts
    f = facts()
    return (name in f["script_names"] or any(name.startswith(p) for p in f["script_prefixes"])
            or any(p in ("tests", "test", "benchmarks", "examples", "scripts") for p in parts[:-1]))


def _wrappers(root: Path, extensions) -> tuple[str, ...]:
    """Python modules outside any package that import (or load()) one of the extensions and define the
    classes or functions around it: the project's Python API, carried into the package."""
    # the extension modules themselves: a file that imports only their package (torchsort's extra/cifar10.py:
    # `import torchsort`) uses the package, it does not wrap the extension
    modules = {e.module for e in extensions}
    leaves = {e.module for e in extensions if not e.package}
    out = []
    for rel in sources.walk(root, (".py",)):
        if _is_script(rel) or (root / Path(rel).parent / "__init__.py").is_file() and Path(rel).parent != Path("."):
            continue
        text = sources.read_text(root / rel)
        if text is None:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        if not any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in tree.body):
            continue
        if any(isinstance(n, (ast.For, ast.While, ast.With)) for n in tree.body):
            continue  # work at import time: a script
        if _imports_any(tree, modules) or _loads_any(tree, leaves):
            out.append(rel)
    return tuple(out)


def _imports_any(tree: ast.Module, modules: set[str]) -> bool:
    """Whether the file imports one of the extension modules (`import m`, `import pkg.m`, `from pkg import m`,
    `from m import f`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name in modules for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module in modules or any(f"{node.module}.{a.name}" in modules for a in node.names)):
            return True
    return False


def _loads_any(tree: ast.Module, names: set[str]) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            func = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            if func in ("load", "load_inline"):
                for kw in node.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant) and kw.value.value in names:
                        return True
                if node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in names:
                    return True
    return False


# --- build.toml (the agent-written layout) ----------------------------------------------------------

def _from_layout(root: Path, existing: Existing, text: str) -> Discovery:
    data = tomllib.loads(text)
    torch = data.get("torch") if isinstance(data.get("torch"), dict) else None
    if torch is None:
        raise ProjectError(f"{root / 'build.toml'}: no [torch] table: nothing compiled to port",
                           "publisher adopt ports compiled torch extensions; run publisher check on this project")
    general = data.get("general") if isinstance(data.get("general"), dict) else {}
    kernels = data.get("kernel") if isinstance(data.get("kernel"), dict) else {}
    backends = [b for b in (general.get("backends") or []) if isinstance(b, str)]
    backends += [k.get("backend") for k in kernels.values() if isinstance(k, dict) and isinstance(k.get("backend"), str)
                 and k.get("backend") not in backends]
    listed = [s for s in (torch.get("src") or []) if isinstance(s, str)]
    for kernel in kernels.values():
        if isinstance(kernel, dict):
            listed += [s for s in (kernel.get("src") or []) if isinstance(s, str) and s not in listed]
    name = existing.name or root.name
    pkg = re.sub(r"[^0-9A-Za-z_]", "_", name)
    module = f"{pkg}._ops"  # what kernel-builder calls the extension
    ext = Extension(module=module, backend=backends[0] if backends else "cpu", sources=tuple(listed),
                    include_dirs=tuple(i for i in (torch.get("include") or []) if isinstance(i, str)),
                    origin="build.toml")
    return Discovery(root=root, route="build.toml", how="read", extensions=(ext,), existing=existing,
                     layout_toml=text, wrappers=())


# --- one extension, normalised ----------------------------------------------------------------------

def _extension(root: Path, base: Path, kind: str, name, srcs, kwargs: dict, origin: str, line: int | None,
               cwd: Path, must_exist: bool = True) -> tuple[Extension | None, list[Finding]]:
    findings: list[Finding] = []
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        return None, [finding("PA101", f"an extension named {name!r}: not a module name", file=origin, line=line)]
    rels: list[str] = []
    for s in srcs if isinstance(srcs, (list, tuple)) else [srcs]:
        s = str(s)
        path = Path(s) if os.path.isabs(s) else cwd / s
        rel = _project_path(root, base, path)
        if rel is None:
            findings.append(finding("PA151", f"extension `{name}`: source {s} is outside the project", file=origin,
                                    line=line, hint="copy it into the project: the build sees only the project folder"))
            continue
        if must_exist and not (root / rel).is_file():
            findings.append(finding("PA151", f"extension `{name}`: source {rel} does not exist", file=origin, line=line,
                                    hint="fix the path in the build script"))
            continue
        rels.append(rel)
    includes: list[str] = []
    for d in _strings(kwargs.get("include_dirs")):
        path = Path(d) if os.path.isabs(d) else cwd / d
        rel = _project_path(root, base, path)
        if rel is None:
            findings.append(finding("PA151", f"extension `{name}`: include folder {d} is outside the project "
                                    "(left out)", file=origin, line=line,
                                    hint="copy the headers into the project, or use a build.toml depends entry "
                                         "(cutlass_*) if it is CUTLASS"))
        elif rel not in includes:
            includes.append(rel)
    defines = []
    for macro in kwargs.get("define_macros") or []:
        if isinstance(macro, (list, tuple)) and macro and isinstance(macro[0], str):
            value = macro[1] if len(macro) > 1 else None
            defines.append(macro[0] if value in (None, "") else f"{macro[0]}={value}")
    compile_args = kwargs.get("extra_compile_args") or []
    if isinstance(compile_args, dict):
        cxx = _strings(compile_args.get("cxx"))
        nvcc = _strings(compile_args.get("nvcc"))
    else:
        cxx = nvcc = _strings(compile_args)
    link = [f"-l{lib}" for lib in _strings(kwargs.get("libraries"))] + _strings(kwargs.get("extra_link_args"))
    backend = "cuda" if kind == "cuda" or any(r.endswith((".cu", ".cuh")) for r in rels) else "cpu"
    if not rels:
        return None, findings + [finding("PA101", f"extension `{name}` has no source in the project", file=origin,
                                         line=line)]
    return Extension(module=name, backend=backend, sources=tuple(rels), include_dirs=tuple(includes),
                     defines=tuple(defines), cxx_flags=tuple(cxx), nvcc_flags=tuple(nvcc), link=tuple(link),
                     origin=origin, line=line), findings


def _project_path(root: Path, base: Path, path: Path) -> str | None:
    """A path the script produced (in the project, or in the scratch copy it ran in) relative to the project."""
    path = Path(os.path.normpath(path))
    for anchor in (base, root.resolve(), Path(os.path.normpath(root.absolute()))):
        try:
            rel = path.relative_to(anchor)
        except ValueError:
            continue
        return sources.relative(root, rel.as_posix())
    return None


def _strings(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value if isinstance(v, (str, os.PathLike))]


def _arch_list(environ: dict) -> tuple[str, ...] | None:
    value = environ.get("TORCH_CUDA_ARCH_LIST")
    if not isinstance(value, str) or not value.strip():
        return None
    return tuple(v for v in re.split(r"[;\s,]+", value.strip()) if v)
