"""The validated build.toml, in edition-5 shape, as frozen dataclasses.

Every later stage (plan, build, test, push) reads a `Project`; none of them
looks at raw TOML again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from publisher.data import read_yaml

_BACKEND_TABLE = read_yaml("backends.yaml")["backends"]
BACKENDS = tuple(_BACKEND_TABLE)
KERNEL_BACKENDS = tuple(b for b, facts in _BACKEND_TABLE.items() if facts["kernel"])  # may have compiled code
ARCH_BACKENDS = tuple(b for b, facts in _BACKEND_TABLE.items() if facts.get("archs"))  # per-toolkit architecture lists
V1_UNIVERSAL_BACKENDS = tuple(b for b, facts in _BACKEND_TABLE.items() if facts["v1-universal"])
FrameworkKind = Literal["torch", "torch-noarch", "tvm-ffi"]


@dataclass(frozen=True)
class KernelDependency:
    repo_id: str
    version: int | None = None
    revision: str | None = None


@dataclass(frozen=True)
class BackendExtras:
    """[general.cuda], [general.xpu], [general.neuron], [general.tpu]."""

    python_depends: tuple[str, ...] = ()
    kernel_depends: tuple[KernelDependency, ...] = ()
    minver: str | None = None  # cuda only
    maxver: str | None = None  # cuda only


@dataclass(frozen=True)
class General:
    name: str
    version: int
    license: str
    backends: tuple[str, ...]
    upstream: str | None = None
    source: str | None = None
    python_depends: tuple[str, ...] = ()
    kernel_depends: tuple[KernelDependency, ...] = ()
    backend_extras: Mapping[str, BackendExtras] = field(default_factory=dict)
    hub_repo_id: str | None = None
    hub_branch: str | None = None

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")

    @property
    def cuda(self) -> BackendExtras:
        return self.backend_extras.get("cuda", BackendExtras())


@dataclass(frozen=True)
class Framework:
    kind: FrameworkKind
    src: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    pyext: tuple[str, ...] = ("py",)
    minver: str | None = None
    maxver: str | None = None
    cxx_flags: tuple[str, ...] = ()
    # backend -> minimum torch version of the stable ABI; empty = not stable-ABI
    stable_abi: Mapping[str, str] = field(default_factory=dict)
    # [torch-noarch] only: archs recorded in metadata (upstream keys cuda_capabilities / rocm_archs)
    cuda_capabilities: tuple[str, ...] | None = None
    rocm_archs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Kernel:
    name: str
    backend: str
    src: tuple[str, ...]
    depends: tuple[str, ...]
    include: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    cuda_capabilities: tuple[str, ...] | None = None  # None = toolkit defaults
    cuda_flags: tuple[str, ...] = ()
    cuda_minver: str | None = None
    rocm_archs: tuple[str, ...] | None = None
    hip_flags: tuple[str, ...] = ()
    sycl_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildConfig:
    general: General
    framework: Framework
    kernels: tuple[Kernel, ...]
    edition: int  # edition of the file as written (4 is upgraded in memory)

    def kernels_for(self, backend: str) -> tuple[Kernel, ...]:
        return tuple(k for k in self.kernels if k.backend == backend)

    @property
    def is_noarch(self) -> bool:
        return self.framework.kind == "torch-noarch"


@dataclass(frozen=True)
class Project:
    """A project folder (root is set) or a lone build.toml (root is None)."""

    config: BuildConfig
    build_toml: Path
    root: Path | None
    platforms: tuple[str, ...] | None = None  # publisher.toml `platforms`; None = every platform
    hub_cache_trust: tuple[str, ...] = ()  # publisher.toml `hub-cache-trust`

    @property
    def name(self) -> str:
        return self.config.general.name

    @property
    def python_name(self) -> str:
        return self.config.general.python_name

    @property
    def ext_dir(self) -> Path:
        """torch-ext/ (or tvm-ffi-ext/) holding the Python package and binding."""
        assert self.root is not None
        sub = "tvm-ffi-ext" if self.config.framework.kind == "tvm-ffi" else "torch-ext"
        return self.root / sub

    @property
    def extension_name(self) -> str:
        """What kernel-builder names the built extension (its Nix output, `<name>-torch-ext`): its test
        shell puts `<that>/<variant>` on PYTHONPATH, and some projects' conftest.py looks for it there."""
        return f"{self.name}-{'tvm-ffi-ext' if self.config.framework.kind == 'tvm-ffi' else 'torch-ext'}"

    @property
    def package_dir(self) -> Path:
        return self.ext_dir / self.python_name
