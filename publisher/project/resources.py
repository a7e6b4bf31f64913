"""World facts `check` validates against, read from publisher/resources/*.yaml
(curated python-depends, build dependencies, Hub license identifiers)."""

from __future__ import annotations

from publisher.data import read_yaml as _load


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
