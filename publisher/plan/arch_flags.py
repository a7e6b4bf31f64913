"""Which CPUs a compiler flag can be used on (resources/arch_flags.yaml)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import yaml

from publisher.data import data_path

_FILE = data_path("arch_flags.yaml")


@lru_cache(maxsize=1)
def _rules() -> tuple[tuple[re.Pattern, tuple[str, ...]], ...]:
    data = yaml.safe_load(_FILE.read_text())
    return tuple((re.compile(r["pattern"]), tuple(r["cpus"])) for r in data["rules"])


def cpus_for(flag: str) -> tuple[str, ...] | None:
    """The CPUs that accept `flag`; None when it is not architecture-specific."""
    for pattern, cpus in _rules():
        if pattern.fullmatch(flag):
            return cpus
    return None


def conflicts(flags: Iterable[str], platform: str) -> list[tuple[str, tuple[str, ...]]]:
    """(flag, the CPUs it is for) for each flag that cannot compile for `platform` (e.g. aarch64-linux)."""
    cpu = platform.partition("-")[0]
    found = []
    for flag in flags:
        cpus = cpus_for(flag)
        if cpus is not None and cpu not in cpus:
            found.append((flag, cpus))
    return found
