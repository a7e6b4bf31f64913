"""Project folder checks: listed paths exist and stay inside the project, the
Python package and binding are where the build expects them, generated files
are not committed, and there are tests."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath

from publisher.codes import finding
from publisher.findings import Finding
from publisher.project.abi3 import check_abi3_sources
from publisher.project.submodules import check_submodules
from publisher.project.tree import not_source

_BINDING_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".mm", ".cu")
_FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")
MAX_WALK = 20000  # files; a project bigger than this is not walked for symlinks
MAX_COMPONENT = 255  # bytes in one file name (NAME_MAX on Linux, macOS and Windows)
MAX_PATH = 4096  # bytes in a whole path (PATH_MAX on Linux)


def _strs(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _table(data: Mapping, key: str) -> Mapping:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def listed_paths(data: Mapping) -> Iterator[tuple[str, str, bool]]:
    """(field, path, is_include) for every path build.toml names."""
    for name in ("torch", "tvm-ffi"):
        table = _table(data, name)
        for key in ("src", "include"):
            for path in _strs(table.get(key)):
                yield f"{name}.{key}", path, key == "include"
    for kname, kernel in _table(data, "kernel").items():
        if isinstance(kernel, Mapping):
            for key in ("src", "include"):
                for path in _strs(kernel.get(key)):
                    yield f"kernel.{kname}.{key}", path, key == "include"


def unusable(text: str) -> str | None:
    """Why no file system can hold the path `text`, or None."""
    if "\0" in text:
        return "contains a NUL character"
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:
        return "is not a valid file name (it has an unpaired surrogate)"
    if len(raw) > MAX_PATH:
        return f"is {len(raw)} bytes long; paths are limited to {MAX_PATH}"
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > MAX_COMPONENT:
        return f"has a name of {len(longest)} bytes; file names are limited to {MAX_COMPONENT}"
    return None


def file_kind(path: Path) -> str | None:
    """What `path` is when it is not a regular file (or a link to one): a folder,
    a FIFO, a broken link...; None for a regular file or nothing at all."""
    try:
        info = path.lstat()
    except (OSError, ValueError):
        return None
    if stat.S_ISLNK(info.st_mode):
        try:
            info = path.stat()
        except OSError:
            return f"a symlink to `{os.readlink(path)}`, which does not exist"
    mode = info.st_mode
    for test, name in ((stat.S_ISREG, None), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def check_layout(root: Path, data: Mapping, build_toml: str) -> list[Finding]:
    out: list[Finding] = []
    real_root = root.resolve()
    for field, text, is_include in listed_paths(data):
        if not text.strip():
            out.append(finding("PB401", f"{field}: empty path", field=field, file=build_toml, hint="remove the empty entry"))
            continue
        problem = unusable(text)
        if problem:
            out.append(finding("PB401", f"{field}: `{_show(text)}` {problem}", field=field, file=build_toml,
                               hint="fix the path (relative to the folder holding build.toml)"))
            continue
        if PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute() or PureWindowsPath(text).drive:
            out.append(finding("PB402", f"{field}: `{text}` is an absolute path", field=field, file=build_toml,
                               hint="paths are relative to the folder holding build.toml"))
            continue
        target = root / text
        try:
            resolved = target.resolve()
        except (OSError, RuntimeError):
            resolved = None
        if resolved is None or not _inside(resolved, real_root):
            why = "a symlink pointing outside" if ".." not in PurePosixPath(text).parts else "`..`"
            out.append(finding("PB402", f"{field}: `{text}` leaves the project folder (through {why})", field=field,
                               file=build_toml, hint="keep every source inside the project: the build copies only the project folder"))
            continue
        kind = file_kind(target)
        if not os.path.lexists(target):
            wanted = "folder" if is_include else "file"
            out.append(finding("PB401", f"{field}: {wanted} `{text}` does not exist", field=field, file=build_toml,
                               hint=f"create it or fix the path (relative to {root})"))
        elif is_include and kind != "a folder":
            out.append(finding("PB401", f"{field}: `{text}` is {kind or 'a file'}, not a folder", field=field,
                               file=build_toml, hint="include lists folders of headers; list files under src"))
        elif not is_include and kind is not None:
            hint = ("src lists files: name the files in it, or list the folder under include"
                    if kind == "a folder" else "src lists regular files the compiler can read")
            out.append(finding("PB401", f"{field}: `{text}` is {kind}, not a file", field=field, file=build_toml, hint=hint))
    out += _symlinks(root, real_root)
    out += _package(root, data)
    out += check_abi3_sources(root, data)
    out += check_submodules(root, data, "tvm-ffi-ext" if "tvm-ffi" in data else "torch-ext")
    return out


def _symlinks(root: Path, real_root: Path) -> list[Finding]:
    out: list[Finding] = []
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not not_source(Path(folder) / d)]
        for name in dirs + files:
            seen += 1
            path = Path(folder) / name
            if path.is_symlink():
                try:
                    target = path.resolve()
                except (OSError, RuntimeError):
                    target = None
                if target is None or not _inside(target, real_root):
                    rel = path.relative_to(root)
                    out.append(finding("PB402", f"symlink `{rel}` points outside the project ({os.readlink(path)})",
                                       file=str(path), hint="copy the file into the project or use a dependency instead"))
        if seen > MAX_WALK:
            break
    return out


def _package(root: Path, data: Mapping) -> list[Finding]:
    out: list[Finding] = []
    name = _table(data, "general").get("name")
    kinds = [k for k in _FRAMEWORKS if k in data]
    if not isinstance(name, str) or len(kinds) != 1:
        return out
    ext = "tvm-ffi-ext" if kinds[0] == "tvm-ffi" else "torch-ext"
    problem = unusable(name)
    if problem:  # upstream's parser takes any length; no file system holds the package folder
        out.append(finding("PB403", f"Python package folder {ext}/{name.replace('-', '_')[:40]}... cannot exist: "
                           f"general.name {problem}", field="general.name",
                           hint="shorten the name: it names the package folder, the module and the Hub repository"))
        return out
    package = root / ext / name.replace("-", "_")
    if not (package / "__init__.py").is_file():
        what = "folder" if not package.is_dir() else "`__init__.py`"
        out.append(finding("PB403", f"Python package {what} missing: {ext}/{package.name}/__init__.py",
                           file=str(package), hint=f"create {ext}/{package.name}/__init__.py: it is the module users import"))
    elif (package / "_ops.py").exists():
        out.append(finding("PB405", f"{ext}/{package.name}/_ops.py is generated by the build and should not be committed",
                           file=str(package / "_ops.py"), hint="delete it (and add it to .gitignore); the build writes its own"))
    if kinds[0] in ("torch", "tvm-ffi") and _compiled(data):
        sources = _strs(_table(data, kinds[0]).get("src"))
        if not any(s.endswith(_BINDING_SUFFIXES) for s in sources):
            out.append(finding("PB404", f"[{kinds[0]}] src lists no C/C++ binding source, but the project has compiled kernels",
                               field=f"{kinds[0]}.src",
                               hint=f"add e.g. `src = [\"{ext}/torch_binding.cpp\", \"{ext}/torch_binding.h\"]` registering the ops"))
    for folder in (root / ext, root):
        path = folder / "registration.h"
        if path.is_file():
            out.append(finding("PB405", f"{path.relative_to(root)} is generated by the build and should not be committed",
                               file=str(path), hint="delete it; the build provides registration.h"))
    if not (root / "tests").is_dir():
        out.append(finding("PB406", "no tests/ folder: `publisher test` can only run its default smoke test "
                           "(load, op registration, tensor-only calls)", file=str(root),
                           hint="add tests/ that load the kernel with kernels.get_kernel(\"<repo-id>\", version=<N>, "
                           "trust_remote_code=[\"<repo-id>\"]) and "
                           "compare its ops against a reference implementation"))
    return out


def _show(text: str) -> str:
    """A path for a message: control characters escaped, very long ones cut."""
    shown = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return shown if len(shown) <= 80 else f"{shown[:60]}...({len(text)} characters)"


def _compiled(data: Mapping) -> bool:
    backends = set(_strs(_table(data, "general").get("backends")))
    return any(isinstance(k, Mapping) and k.get("backend") in backends for k in _table(data, "kernel").values())
