"""GPU architectures a kernel is compiled for, computed the way kernel-builder's
CMake does it (`cuda_archs_loose_intersection` / `hip_archs_loose_intersection`),
so that `check` and `plan` know the result before anything compiles.

Toolkit default lists come from matrix.yaml and are passed in; the set of
capability names that exist at all is data (resources/capabilities.yaml)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from publisher.data import data_path, load_yaml

_RESOURCE = data_path("capabilities.yaml")
_CUDA_SYNTAX = re.compile(r"(\d{1,6})\.(\d{1,6})([af]?)(\+PTX)?")
_ROCM_SYNTAX = re.compile(r"gfx[0-9a-f]{3,5}")


@dataclass(frozen=True)
class Capability:
    """A CUDA capability as written in build.toml: `9.0`, `9.0a`, `10.0f`, `12.0+PTX`."""

    major: int
    minor: int
    suffix: str = ""  # "", "a" (arch-specific) or "f" (family-specific)
    ptx: bool = False

    @property
    def base(self) -> str:
        """The plain `<major>.<minor>` without suffix or +PTX."""
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        return f"{self.base}{self.suffix}{'+PTX' if self.ptx else ''}"


@lru_cache(maxsize=1)
def _known() -> dict:
    with _RESOURCE.open() as fh:
        return load_yaml(fh)


def known_cuda_capabilities() -> tuple[str, ...]:
    """Every `<major>.<minor>` that names a real NVIDIA architecture."""
    return tuple(_known()["cuda"]["capabilities"])


def cuda_target_dirs(platform: str) -> tuple[str, ...]:
    """Names of the folders under a CUDA toolkit's targets/ that hold `platform`'s headers."""
    return tuple(_known()["cuda"]["target_dirs"].get(platform, ()))


def known_rocm_archs() -> tuple[str, ...]:
    return tuple(_known()["rocm"]["archs"])


def _syntax(text: str) -> Capability:
    m = _CUDA_SYNTAX.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"{text!r} is not a CUDA capability (expected <major>.<minor>, optional a/f suffix, optional +PTX)")
    return Capability(int(m[1]), int(m[2]), m[3], bool(m[4]))


def parse_capability(text: str) -> Capability:
    """Parse and check that the capability exists; ValueError names the problem."""
    cap = _syntax(text)
    data = _known()["cuda"]
    if cap.base not in data["capabilities"]:
        raise ValueError(f"unknown CUDA capability {text!r}: no GPU has compute capability {cap.base}")
    if cap.suffix == "a" and cap.base not in data["arch_specific"]:
        raise ValueError(f"{text!r}: compute capability {cap.base} has no arch-specific ('a') variant")
    if cap.suffix == "f" and cap.base not in data["family_specific"]:
        raise ValueError(f"{text!r}: compute capability {cap.base} has no family-specific ('f') variant")
    return cap


def is_known_capability(text: str) -> bool:
    try:
        parse_capability(text)
    except ValueError:
        return False
    return True


def is_wellformed_capability(text: str) -> bool:
    """Spelled like a capability (whether or not such a GPU exists)."""
    return isinstance(text, str) and _CUDA_SYNTAX.fullmatch(text) is not None


def is_known_rocm_arch(text: str) -> bool:
    return isinstance(text, str) and text in _known()["rocm"]["archs"]


def _version_key(cap: Capability) -> tuple[int, int]:
    return (cap.major, cap.minor)


def _natural_key(text: str) -> tuple:
    """CMake `list(SORT ... COMPARE NATURAL)` order for capability strings."""
    cap = _syntax(text)
    return (cap.major, cap.minor, text[len(cap.base):])


def effective_cuda_archs(kernel_caps: tuple[str, ...] | None, toolkit_defaults: tuple[str, ...]) -> tuple[str, ...]:
    """The capabilities one CUDA kernel is compiled for with one toolkit.

    No list (or an empty one) means the toolkit defaults as they are, +PTX
    included. Otherwise, for each default target (without +PTX): an `a`/`f`
    entry whose base is a target takes that target; every other target takes
    the highest kernel capability <= it of the same major (any major when the
    kernel asked for +PTX on it). An empty result is what upstream rejects."""
    if not kernel_caps:
        return tuple(toolkit_defaults)
    targets = sorted({_syntax(t).base for t in toolkit_defaults}, key=lambda b: _version_key(_syntax(b)))
    requested = [_syntax(c) for c in kernel_caps]
    ptx = {f"{c.base}{c.suffix}" for c in requested if c.ptx}

    chosen: list[str] = []
    remaining = list(targets)
    plain: list[Capability] = []
    for cap in requested:
        if cap.suffix:
            if cap.base in targets:
                if cap.base in remaining:
                    remaining.remove(cap.base)
                chosen.append(f"{cap.base}{cap.suffix}")
        else:
            plain.append(Capability(cap.major, cap.minor))
    plain = sorted(set(plain), key=_version_key)

    for target in remaining:
        tgt = _syntax(target)
        best = None
        for cap in plain:
            if _version_key(cap) > _version_key(tgt):
                break
            if cap.major == tgt.major or cap.base in ptx:
                best = cap.base
        if best is not None:
            chosen.append(best)

    result = dict.fromkeys(a + ("+PTX" if a in ptx else "") for a in chosen)
    return tuple(sorted(result, key=_natural_key))


def effective_rocm_archs(kernel_archs: tuple[str, ...] | None, toolkit_defaults: tuple[str, ...]) -> tuple[str, ...]:
    """The ROCm archs one kernel is compiled for: its list (sorted as strings,
    as upstream does) restricted to the toolkit's supported set; no list means
    every supported arch."""
    if not kernel_archs:
        return tuple(toolkit_defaults)
    supported = set(toolkit_defaults)
    return tuple(a for a in sorted(set(kernel_archs)) if a in supported)
