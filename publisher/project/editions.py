"""Which build.toml edition a parsed file is written in.

`edition = 5` is current. Without an edition key upstream tries v4, then v3;
older shapes (v1/v2 and the 2024 pre-v1 format) are recognised by the keys
only they use. Each such key is a `Marker`, so findings can point at it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# era names, oldest first
PRE_V1, V1_V2, V3, V4, V5, UNSUPPORTED = "pre-v1", "v1/v2", "v3", "v4", "v5", "unsupported"


@dataclass(frozen=True)
class Marker:
    field: str  # dotted path of the key that gives the era away
    reason: str


@dataclass(frozen=True)
class Edition:
    era: str
    edition: Any = None  # the `edition` value as written, if any
    markers: tuple[Marker, ...] = field(default_factory=tuple)

    @property
    def is_legacy(self) -> bool:
        return self.era in (PRE_V1, V1_V2, V3)


def _table(data: Mapping, key: str) -> Mapping:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _pre_v1_markers(data: Mapping) -> list[Marker]:
    general, torch = _table(data, "general"), _table(data, "torch")
    found = [Marker("general.compute-framework", "`compute-framework` is the 2024 pre-v1 format")] if "compute-framework" in general else []
    for key in ("name", "pyroot", "pysrc"):
        if key in torch:
            found.append(Marker(f"torch.{key}", f"`[torch] {key}` is the 2024 pre-v1 format"))
    for name, kernel in _table(data, "kernel").items():
        if isinstance(kernel, Mapping):
            for key in ("capabilities", "supports-hipify"):
                if key in kernel:
                    found.append(Marker(f"kernel.{name}.{key}", f"`{key}` is the 2024 pre-v1 kernel format"))
    return found


def _v1_v2_markers(data: Mapping) -> list[Marker]:
    general, torch = _table(data, "general"), _table(data, "torch")
    found: list[Marker] = []
    if "universal" in general:
        found.append(Marker("general.universal", "`general.universal` is the v2 way to declare a Python-only kernel (now [torch-noarch])"))
    if "universal" in torch:
        found.append(Marker("torch.universal", "`[torch] universal` is the v1 way to declare a Python-only kernel (now [torch-noarch])"))
    for key in ("cuda-minver", "cuda-maxver"):
        if key in general:
            found.append(Marker(f"general.{key}", f"`general.{key}` moved to `[general.cuda] {key[5:]}`"))
    for name, kernel in _table(data, "kernel").items():
        if not isinstance(kernel, Mapping):
            continue
        if "language" in kernel:
            found.append(Marker(f"kernel.{name}.language", "per-kernel `language` is v1; kernels now say `backend`"))
        elif "backend" not in kernel and kernel:
            found.append(Marker(f"kernel.{name}", "kernel without `backend` is the v1 format (CUDA implied)"))
    if general and "backends" not in general:
        found.append(Marker("general", "no `general.backends`: the list was derived from the kernels before v3"))
    return found


def _looks_v4(data: Mapping) -> bool:
    general, torch = _table(data, "general"), _table(data, "torch")
    has_framework = any(k in data for k in ("torch", "torch-noarch", "tvm-ffi"))
    if "license" in general and "version" in general and has_framework:
        return True
    v4_only = ("torch-noarch" in data, "stable-abi" in torch, "cxx-flags" in torch, "source" in general,
               "cxx-flags" in _table(data, "tvm-ffi"))
    return any(v4_only)


def detect(data: Mapping) -> Edition:
    general = _table(data, "general")
    if "edition" in general:
        value = general["edition"]
        if value == 5 and type(value) is int:
            return Edition(V5, value)
        return Edition(UNSUPPORTED, value)
    pre = _pre_v1_markers(data)
    if pre:
        return Edition(PRE_V1, None, tuple(pre + _v1_v2_markers(data)))
    old = _v1_v2_markers(data)
    if old:
        return Edition(V1_V2, None, tuple(old))
    if _looks_v4(data):
        return Edition(V4)
    missing = [f"`{k}`" for k in ("version", "license") if k not in general]
    if not any(k in data for k in ("torch", "torch-noarch", "tvm-ffi")):
        missing.append("framework table (v3 meant [torch-noarch])")
    reason = "v3 format: no `edition` and no " + ", no ".join(missing)
    return Edition(V3, None, (Marker("general", reason),))
