"""Version strings (build.toml bounds, matrix cells) and the one rule that
says whether a version lies within [minver, maxver].

Upstream compares whole versions, trailing zeros dropped (kernels-data's
`Version`, the generated CMake `VERSION_GREATER`, Nix `compareVersions` in
its build-set filter): `maxver = "12"` admits CUDA 12.0 but not 12.8. check
and plan both call `within`, so they cannot disagree on a cell."""

from __future__ import annotations

import re

VERSION = re.compile(r"\d+(\.\d+)*")


def parse_version(text: object) -> tuple[int, ...] | None:
    """`12.8` -> (12, 8); trailing zeros dropped as upstream does; None if invalid."""
    text = text.strip() if isinstance(text, str) else ""
    if not VERSION.fullmatch(text):
        return None
    parts = [int(p) for p in text.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def version_key(text: str) -> tuple[int, ...]:
    """A sort key for a version-like string; non-numeric parts are ignored."""
    return tuple(int(p) for p in str(text).split(".") if p.isdigit())


def within(version: str, minver: object = None, maxver: object = None) -> bool:
    """Inclusive bounds. A bound that is absent or not a version (check reports
    that as PB210) does not constrain; a version that is not one is outside."""
    v = parse_version(version)
    low = parse_version(minver)
    high = parse_version(maxver)
    return v is not None and (low is None or v >= low) and (high is None or v <= high)
