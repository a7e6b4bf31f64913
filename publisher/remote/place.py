"""`--on PLACE:TARGET[,TARGET...]`: which place, which targets (for hf-jobs:
hardware flavours). The places are data (resources/places.yaml); each names
the module that runs work there."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

from publisher.data import read_yaml
from publisher.errors import UsageError

_TARGET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class PlaceInfo:
    key: str
    name: str
    module: str
    target: str
    example: str
    docs: str = ""
    platform: str = ""  # what its jobs run on (x86_64-linux); "" = the variants' own
    build_jobs: str = "variant"  # `build --on`: one job per variant, or per image


@dataclass(frozen=True)
class Place:
    info: PlaceInfo
    targets: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.info.key}:{','.join(self.targets)}"


def places() -> dict[str, PlaceInfo]:
    table = read_yaml("places.yaml")["places"]
    return {key: PlaceInfo(key=key, **entry) for key, entry in table.items()}


def parse_place(text: str, option: str = "--on") -> Place:
    known = places()
    examples = ", ".join(p.example for p in known.values())
    key, sep, rest = (text or "").strip().partition(":")
    if key not in known:
        raise UsageError(f"{option} {text!r}: unknown place {key!r}",
                         f"write {option} PLACE:TARGET[,TARGET...], e.g. {examples}")
    info = known[key]
    targets = tuple(t.strip() for t in rest.split(",") if t.strip()) if sep else ()
    if not targets:
        raise UsageError(f"{option} {text!r}: {info.name} needs at least one {info.target}",
                         f"e.g. {option} {info.example}")
    bad = [t for t in targets if not _TARGET.fullmatch(t)]
    if bad:
        raise UsageError(f"{option} {text!r}: {bad[0]!r} is not a {info.target} name", f"e.g. {option} {info.example}")
    return Place(info, tuple(dict.fromkeys(targets)))


def load_module(place: Place):
    """The module that runs work at this place (it has make_runner)."""
    return importlib.import_module(place.info.module)
