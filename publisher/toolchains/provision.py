"""Toolchains: an isolated Python environment per ToolchainSpec holding that
variant's torch (and for CUDA a matching nvcc), cached in the user cache
folder and shared across projects and runs.

`ensure_toolchain(spec)` returns a `Toolchain` (paths and versions the
compiler driver needs) or raises `ToolchainUnavailable` with the reason."""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion

from publisher import env, runner
from publisher.data import read_yaml
from publisher.errors import ToolchainUnavailable
from publisher.host import host_platform
from publisher.plan.variants import backend_of_compute, compute_version
from publisher.project.versions import version_key, within
from publisher.toolchains import probe as toolchain_probe
from publisher.toolchains.spec import ToolchainSpec

LineSink = Callable[[str], None]
_RECORD = "toolchain.json"
_FORMAT = 2  # bump when the environment layout or record changes


@dataclass(frozen=True)
class Toolchain:
    key: str
    python: str
    env_dir: str | None  # None: an existing interpreter used as is (--local)
    python_version: str
    python_include: str
    torch_version: str  # "2.11.0+cu130"
    torch_dir: str
    cuda_version: str | None  # CUDA torch was built for ("13.0"); None for CPU torch
    cuda_home: str | None  # toolkit root holding bin/nvcc
    nvcc: str | None
    nvcc_version: str | None
    cxx: str
    cxx_version: str
    include_dirs: tuple[str, ...]  # torch + CUDA wheel headers (Python's come separately)
    library_dirs: tuple[str, ...]  # torch/lib, CUDA runtime libs

    @property
    def identity(self) -> str:
        """Stable text naming what this toolchain compiles with (cache key input)."""
        return json.dumps(
            {
                "key": self.key,
                "python": self.python_version,
                "torch": self.torch_version,
                "cuda": self.cuda_version,
                "nvcc": self.nvcc_version,
                "cxx": self.cxx_version,
            },
            sort_keys=True,
        )

    def versions(self) -> dict[str, str]:
        """For provenance and the summary."""
        out = {"python": self.python_version, "torch": self.torch_version, "cxx": self.cxx_version}
        if self.nvcc_version:
            out["nvcc"] = self.nvcc_version
        return out


def cache_root() -> Path:
    if env.cache_dir():
        return Path(env.cache_dir()) / "toolchains"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "publisher" / "toolchains"


def serves(spec: ToolchainSpec, info: dict, platform: str) -> bool:
    """Does the torch described by `info` (toolchains.probe) satisfy the matrix cell of `spec`:
    the cell's torch requirement, its compute flavour (CUDA/ROCm version; a cpu cell: any
    flavour of that torch, which all carry the same CPU headers and libraries) and platform?"""
    version = info.get("torch_version")
    if not version or spec.platform != platform:
        return False
    try:
        if not Requirement(spec.torch_requirement).specifier.contains(version, prereleases=True):
            return False
    except (InvalidRequirement, InvalidVersion):
        return False
    if ".".join(version.split("+")[0].split(".")[:2]) != spec.torch:
        return False
    backend, wanted = backend_of_compute(spec.compute), compute_version(spec.compute)
    have = {"cuda": info.get("cuda"), "rocm": info.get("hip")}.get(backend)
    if backend == "cpu":
        return True
    return backend in ("cuda", "rocm") and have is not None and _same_minor(have, wanted or "")


@lru_cache(maxsize=1)
def _running_torch() -> dict:
    return toolchain_probe.probe()


def _this_interpreter_serves(spec: ToolchainSpec) -> bool:
    """The running interpreter is the cell's toolchain: nothing to make, nothing to download."""
    info = _running_torch()
    return "error" not in info and serves(spec, info, host_platform())


def recorded_identity(spec: ToolchainSpec) -> str | None:
    """The identity of an already created toolchain, without creating or probing
    anything (cheap: used for cache keys). None when it does not exist yet."""
    python = getattr(spec, "python", None) or (sys.executable if _this_interpreter_serves(spec) else None)
    if python:
        return _interpreter_identity(python)
    record = cache_root() / spec.key / _RECORD
    try:
        return read_record(record).identity
    except (OSError, ValueError, TypeError, KeyError):
        return None


def ensure_toolchain(spec: ToolchainSpec, on_line: LineSink | None = None, log: Path | None = None) -> Toolchain:
    """Return the toolchain for `spec`, creating its environment on first use."""
    on_line = on_line or (lambda _line: None)
    python = getattr(spec, "python", None)
    if python:
        return _describe(spec, Path(python), env_dir=None, log=log)
    if _this_interpreter_serves(spec):
        try:
            toolchain = _describe(spec, Path(sys.executable), env_dir=None, log=log)
        except ToolchainUnavailable as err:  # e.g. no nvcc of its CUDA here: make the environment, which has one
            on_line(f"this interpreter's torch is the cell's, but it cannot build here ({err.reason}); making {spec.key}")
        else:
            note = f"using this interpreter's torch {toolchain.torch_version} ({sys.executable}): it is the cell's torch"
            on_line(note)
            if log is not None:  # the build log says what built the variant
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(f"# {note}\n")
            return toolchain
    _check_obtainable(spec)
    env_dir = cache_root() / spec.key
    record = env_dir / _RECORD
    if record.exists():
        try:
            return read_record(record)
        except (ValueError, TypeError, KeyError):
            pass  # an older record format: recreate below
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    with locked(env_dir.with_suffix(".lock")):
        if record.exists():  # another run created it while we waited
            try:
                return read_record(record)
            except (ValueError, TypeError, KeyError):
                pass
        if env_dir.exists():  # complete (it is renamed in only when installed) but not yet described
            try:
                toolchain = _describe(spec, env_dir / "bin" / "python", env_dir=env_dir, log=log)
                _write_record(record, toolchain)
                return toolchain
            except ToolchainUnavailable:
                shutil.rmtree(env_dir)
        return _create(spec, env_dir, on_line, log)


def ensure_packages(toolchain: Toolchain, requirements: Sequence[str], on_line: LineSink | None = None,
                    log: Path | None = None) -> None:
    """Install extra packages (e.g. kernels, pytest) into the toolchain's
    environment. Refuses to touch an interpreter publisher did not create."""
    if toolchain.env_dir is None:
        missing = [r for r in requirements if not _has_requirement(toolchain.python, r)]
        if missing:
            raise ToolchainUnavailable(
                f"{toolchain.python} lacks {', '.join(missing)}; install them there (publisher does not modify it)"
            )
        return
    with locked(Path(toolchain.env_dir).with_suffix(".lock")):
        _install(toolchain.python, list(requirements), None, on_line or (lambda _l: None), log)


# -- creation -----------------------------------------------------------------

def _check_obtainable(spec: ToolchainSpec) -> None:
    problem = obtainable_problem(spec.platform, spec.compute, host_platform())
    if problem:
        raise ToolchainUnavailable(problem)


def obtainable_problem(platform: str, compute: str, host: str) -> str | None:
    """Why publisher cannot make the toolchain of a (platform, compute) cell on a `host` machine
    (x86_64-linux), None when it can: only the host's own platform, and only toolkits on PyPI."""
    if platform != host:
        return f"{platform} toolchains cannot run on this {host} host"
    backend = backend_of_compute(compute)
    if backend not in ("cpu", "cuda"):
        return (f"the {backend} toolchain ({_TOOLKIT.get(backend, backend)}) is not installable from PyPI; "
                "build this variant with --backend docker or nix, or on a machine that has it")
    return None


_TOOLKIT = {"rocm": "ROCm hipcc", "xpu": "Intel oneAPI DPC++", "metal": "Xcode metal"}


def _create(spec: ToolchainSpec, env_dir: Path, on_line: LineSink, log: Path | None) -> Toolchain:
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.key}.", dir=env_dir.parent))
    try:
        on_line(f"creating toolchain {spec.key} (torch {spec.torch_requirement}, {spec.compute})")
        uv = uv_path()
        if uv:
            # --seed: the environment keeps pip, so it stays usable where uv is not installed
            _run([uv, "venv", "--quiet", "--seed", "--python", sys.executable, str(tmp)], log, on_line,
                 "could not create a virtual environment")
        else:
            _run([sys.executable, "-m", "venv", str(tmp)], log, on_line, "could not create a virtual environment")
        python = tmp / "bin" / "python"
        requirements = [spec.torch_requirement, *spec.extra_requirements]
        _install(str(python), requirements, spec.index_url, on_line, log)
        cuda = compute_version(spec.compute) if backend_of_compute(spec.compute) == "cuda" else None
        if cuda and not _system_nvcc(cuda):
            _install(str(python), _nvcc_requirements(cuda), None, on_line, log)
        os.rename(tmp, env_dir)
        toolchain = _describe(spec, env_dir / "bin" / "python", env_dir=env_dir, log=log)
        _write_record(env_dir / _RECORD, toolchain)
        return toolchain
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _nvcc_requirements(cuda: str) -> list[str]:
    """The nvcc wheels for CUDA `cuda` ("12.8"), per resources/nvcc_wheels.yaml."""
    series = [s for s in read_yaml("nvcc_wheels.yaml")["series"] if within(cuda, s["from"])]
    wheels = max(series, key=lambda s: version_key(s["from"]))["wheels"]
    return [f"{name.format(major=cuda.split('.')[0])}=={cuda}.*" for name in wheels]


def _install(python: str, requirements: list[str], index_url: str | None, on_line: LineSink,
             log: Path | None) -> None:
    uv = uv_path()
    if uv:
        argv = [uv, "pip", "install", "--python", python]
    else:
        # an environment made by uv without --seed has no pip: bootstrap it from the standard library
        if runner.run([python, "-c", "import pip"]).returncode != 0:
            _run([python, "-m", "ensurepip", "--upgrade"], log, on_line, "could not bootstrap pip")
        argv = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    if index_url:
        argv += ["--index-url", index_url]
        if uv:  # uv stops at the first index holding a name; torch's deps may live on PyPI
            argv += ["--extra-index-url", "https://pypi.org/simple", "--index-strategy", "unsafe-best-match"]
        else:  # pip retries an unreachable index 5 times with backoff: minutes before it says so
            argv += ["--retries", "1"]
    for links in filter(None, os.environ.get("PIP_FIND_LINKS", "").split()):
        if uv:
            argv += ["--find-links", links]
    what = f"could not install {' '.join(requirements)}"
    result = runner.run(argv + requirements, log=log, on_line=on_line)
    if result.ok:
        return
    unreachable = _NETWORK_ERROR.search(result.output)
    if index_url and unreachable:
        raise ToolchainUnavailable(f"{what}: the package index {index_url} is unreachable ({unreachable.group(0)})")
    raise ToolchainUnavailable(f"{what}: {_reason(result.output)}")


# uv and pip's words for a host that cannot be reached (name lookup, connect, timeout)
_NETWORK_ERROR = re.compile(
    r"failed to lookup address[^\n]*|Temporary failure in name resolution|Name or service not known|"
    r"Connection refused|Network is unreachable|No route to host|connect(?:ion)? timed out|operation timed out|"
    r"dns error[^\n]*",
    re.I,
)


def _run(argv: list[str], log: Path | None, on_line: LineSink, what: str) -> None:
    result = runner.run(argv, log=log, on_line=on_line)
    if not result.ok:
        raise ToolchainUnavailable(f"{what}: {_reason(result.output)}")


def _reason(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if re.search(r"error|no matching distribution|not found|unsatisfiable|no solution|failed", line, re.I):
            return line[:300]
    return lines[-1][:300] if lines else "unknown error"


def uv_path() -> str | None:
    for candidate in (Path(sys.executable).parent / "uv", shutil.which("uv")):
        if candidate and Path(candidate).exists():
            return str(candidate)
    return None


@contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_record(path: Path) -> Toolchain:
    """The toolchain a record describes; ValueError/TypeError/KeyError for an old or broken one."""
    data = json.loads(path.read_text())
    if data.pop("format", None) != _FORMAT:
        raise ValueError("old toolchain record")
    data["include_dirs"] = tuple(data["include_dirs"])
    data["library_dirs"] = tuple(data["library_dirs"])
    return Toolchain(**data)


def recorded_toolchains() -> list[Toolchain]:
    """Toolchain environments created earlier and still readable (newest key first)."""
    found = []
    for record in sorted(cache_root().glob(f"*/{_RECORD}"), reverse=True):
        try:
            found.append(read_record(record))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return found


def _write_record(path: Path, toolchain: Toolchain) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"format": _FORMAT, **asdict(toolchain)}, indent=2))
    os.replace(tmp, path)


# -- description ---------------------------------------------------------------

def _probe(python: Path, log: Path | None) -> dict:
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        info = toolchain_probe.probe()
    else:
        result = runner.run([str(python), toolchain_probe.__file__], log=log)
        if not result.ok:
            raise ToolchainUnavailable(f"{python} cannot be probed: {_reason(result.output)}")
        info = json.loads(result.output.strip().splitlines()[-1])
    if "error" in info:
        raise ToolchainUnavailable(info["error"])
    return info


def _describe(spec: ToolchainSpec, python: Path, env_dir: Path | None, log: Path | None) -> Toolchain:
    info = _probe(python, log)
    torch_minor = ".".join(info["torch_version"].split(".")[:2])
    if torch_minor != spec.torch:
        raise ToolchainUnavailable(f"{python} has torch {info['torch_version']}, the variant needs torch {spec.torch}")
    backend = backend_of_compute(spec.compute)
    wanted_cuda = compute_version(spec.compute) if backend == "cuda" else None
    have_cuda = info["cuda"]
    if wanted_cuda and have_cuda != wanted_cuda:
        raise ToolchainUnavailable(
            f"torch {info['torch_version']} is built for CUDA {have_cuda or 'none'}, the variant needs CUDA {wanted_cuda}"
            + ("" if spec.index_url else "; name an index with that flavour in matrix.yaml")
        )
    torch_dir = Path(info["torch_dir"])
    includes = [str(torch_dir / "include"), str(torch_dir / "include" / "torch" / "csrc" / "api" / "include")]
    libs = [str(torch_dir / "lib")]
    cuda_home = nvcc = nvcc_version = None
    if wanted_cuda:
        site_nvcc = [Path(b) / "nvcc" for b in info["nvidia_bin"] if (Path(b) / "nvcc").exists()]
        found = _system_nvcc(wanted_cuda) or next(
            ((p, v) for p in site_nvcc if (v := _nvcc_version(p)) and _same_minor(v, wanted_cuda)), None
        )
        if not found:
            raise ToolchainUnavailable(f"no nvcc for CUDA {wanted_cuda} (neither on this system nor installable)")
        nvcc_path, nvcc_version = found
        nvcc, cuda_home = str(nvcc_path), str(nvcc_path.parent.parent)
        # torch's CUDA headers/libs (cusparse.h, cublas...) come from the nvidia wheels
        includes += info["nvidia_include"]
        libs += [str(Path(cuda_home) / "lib64")] if (Path(cuda_home) / "lib64").is_dir() else []
        libs += info["nvidia_lib"]
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise ToolchainUnavailable("no C++ compiler (g++) found; install build-essential")
    return Toolchain(
        key=spec.key,
        python=str(python),
        env_dir=str(env_dir) if env_dir else None,
        python_version=info["python_version"],
        python_include=info["python_include"],
        torch_version=info["torch_version"],
        torch_dir=str(torch_dir),
        cuda_version=have_cuda,
        cuda_home=cuda_home,
        nvcc=nvcc,
        nvcc_version=nvcc_version,
        cxx=cxx,
        cxx_version=_cxx_version(cxx),
        include_dirs=tuple(includes),
        library_dirs=tuple(libs),
    )


def _same_minor(version: str, wanted: str) -> bool:
    return version.split(".")[:2] == wanted.split(".")[:2]


def _system_nvcc(cuda: str) -> tuple[Path, str] | None:
    """A system CUDA toolkit whose nvcc has exactly this major.minor."""
    candidates = [Path(f"/usr/local/cuda-{cuda}/bin/nvcc")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "bin" / "nvcc")
    candidates.append(Path("/usr/local/cuda/bin/nvcc"))
    if shutil.which("nvcc"):
        candidates.append(Path(shutil.which("nvcc")))
    for path in candidates:
        if path.exists() and (version := _nvcc_version(path)) and _same_minor(version, cuda):
            return path, version
    return None


_version_cache: dict[str, str | None] = {}


def _nvcc_version(nvcc: Path) -> str | None:
    key = str(nvcc)
    if key not in _version_cache:
        result = runner.run([key, "--version"])
        m = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", result.output)
        _version_cache[key] = m.group(2) if result.ok and m else None
    return _version_cache[key]


def _cxx_version(cxx: str) -> str:
    if cxx not in _version_cache:
        result = runner.run([cxx, "-dumpfullversion", "-dumpversion"])
        name = Path(cxx).name
        _version_cache[cxx] = f"{name} {result.output.strip()}" if result.ok else name
    return _version_cache[cxx] or cxx


def _interpreter_identity(python: str) -> str:
    """Cheap identity of an existing interpreter: its path and torch's install record."""
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        try:
            torch_version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            torch_version = None
        return json.dumps({"python": python, "torch": torch_version, "cxx": _cxx_version(
            os.environ.get("CXX") or shutil.which("g++") or "c++")}, sort_keys=True)
    info = _probe(Path(python), None)
    return json.dumps({"python": python, "torch": info.get("torch_version")}, sort_keys=True)


def _has_requirement(python: str, requirement: str) -> bool:
    name = re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0]
    result = runner.run([python, "-c", f"import importlib.metadata as m; m.version({name!r})"])
    return result.ok
