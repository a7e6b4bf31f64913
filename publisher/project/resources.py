"""World facts `check` validates against, read from publisher/resources/*.yaml
(curated python-depends, build dependencies, Hub license identifiers)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

_DIR = Path(__file__).resolve().parent.parent / "resources"


def load_yaml(stream):
    """yaml.safe_load, with libyaml where present: the pure-Python loader is
    ~10x slower, and every command reads a few data files."""
    return yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    with (_DIR / name).open() as fh:
        return load_yaml(fh)


def general_python_depends() -> dict[str, dict]:
    return _load("python_depends.yaml")["general"]


def backend_python_depends(backend: str) -> dict[str, dict]:
    return _load("python_depends.yaml")["backends"].get(backend) or {}


def build_depends() -> dict[str, list[str]]:
    """dependency name -> kernel backends it is meant for."""
    return _load("build_depends.yaml")["depends"]


def renamed_build_depends() -> dict[str, str]:
    return _load("build_depends.yaml").get("renamed") or {}


def hub_licenses() -> frozenset[str]:
    return frozenset(_load("licenses.yaml")["hub"])
