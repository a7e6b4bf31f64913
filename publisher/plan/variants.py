"""Variant names, exactly as the `kernels` client parses and ranks them
(see UPSTREAM.md section 3)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_OS_CPUS = {"linux": ("x86_64", "aarch64"), "darwin": ("aarch64",), "windows": ("x86_64",)}
_COMPUTE_BACKEND = (
    (re.compile(r"cpu"), "cpu"),
    (re.compile(r"metal"), "metal"),
    (re.compile(r"cu(\d+)(\d)"), "cuda"),
    (re.compile(r"rocm(\d+)(\d)"), "rocm"),
    (re.compile(r"xpu(\d{4})(\d+)"), "xpu"),
)


def backend_of_compute(compute: str) -> str:
    """`cu130` -> `cuda`, `rocm71` -> `rocm`, `xpu20252` -> `xpu`, `cpu`, `metal`."""
    for pattern, backend in _COMPUTE_BACKEND:
        if pattern.fullmatch(compute):
            return backend
    raise ValueError(f"unknown compute flavour {compute!r} (expected cpu, metal, cuXY, rocmXY or xpuYYYYM)")


def compute_version(compute: str) -> str | None:
    """`cu130` -> `13.0`, `rocm71` -> `7.1`, `xpu20252` -> `2025.2`; None for cpu/metal."""
    for pattern, _ in _COMPUTE_BACKEND:
        m = pattern.fullmatch(compute)
        if m and m.groups():
            return f"{m.group(1)}.{m.group(2)}"
    return None


@dataclass(frozen=True, order=True)
class Platform:
    cpu: str  # x86_64, aarch64
    os: str  # linux, darwin, windows

    @classmethod
    def parse(cls, text: str) -> Platform:
        cpu, _, os = text.partition("-")
        if os not in _OS_CPUS or cpu not in _OS_CPUS[os]:
            raise ValueError(f"unknown platform {text!r} (expected one of {', '.join(all_platforms())})")
        return cls(cpu, os)

    def __str__(self) -> str:
        return f"{self.cpu}-{self.os}"


def all_platforms() -> list[str]:
    return [f"{cpu}-{os}" for os, cpus in _OS_CPUS.items() for cpu in cpus]


@dataclass(frozen=True, order=True)
class Variant:
    """One build variant. `framework` is torch, torch-stable-abi, tvm-ffi or
    torch-noarch; `version` is the torch (or stable-ABI / tvm-ffi) minor
    version as "2.15" (None for noarch); `compute` is cpu/cuXY/rocmXY/
    xpuYYYYM/metal (for noarch: the backend name)."""

    framework: str
    version: str | None
    compute: str
    platform: Platform | None

    @property
    def backend(self) -> str:
        if self.framework == "torch-noarch":
            return self.compute
        return backend_of_compute(self.compute)

    @property
    def name(self) -> str:
        if self.framework == "torch-noarch":
            return f"torch-{self.compute}"
        assert self.version is not None and self.platform is not None
        major, minor = self.version.split(".")
        prefix = {"torch": "torch", "torch-stable-abi": "torch-stable-abi", "tvm-ffi": "tvm-ffi"}[self.framework]
        tag = f"{prefix}{major}{minor}"
        if self.framework == "torch" and self.platform.os == "linux":
            tag += "-cxx11"
        return f"{tag}-{self.compute}-{self.platform}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, name: str) -> Variant:
        m = re.fullmatch(r"torch-([a-z]+)", name)
        if m:
            return cls("torch-noarch", None, m.group(1), None)
        m = re.fullmatch(
            r"(torch-stable-abi|tvm-ffi|torch)(\d)(\d+)(?:-cxx11)?-([a-z]+\d*)-(x86_64|aarch64)-(linux|darwin|windows)",
            name,
        )
        if not m:
            raise ValueError(f"not a variant name: {name!r}")
        framework, major, minor, compute, cpu, os = m.groups()
        backend_of_compute(compute)
        return cls(framework, f"{major}.{minor}", compute, Platform(cpu, os))
