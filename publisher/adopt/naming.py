"""The adopted kernel's name, license and version: given by flags, kept from
an existing build.toml, or found in the project (its package, setup(name=),
its LICENSE file or pyproject.toml), and said where each came from."""

from __future__ import annotations

import re
from dataclasses import dataclass

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from publisher.adopt import sources
from publisher.adopt.buildtoml import is_valid_name, kernel_name
from publisher.adopt.discover import facts
from publisher.adopt.model import Discovery
from publisher.codes import finding
from publisher.errors import UsageError
from publisher.findings import Finding


@dataclass(frozen=True)
class Chosen:
    value: object
    source: str  # where it came from, for the summary


def choose_name(discovery: Discovery, given: str | None, package: str | None) -> Chosen:
    if given is not None:
        if not is_valid_name(given):
            suggestion = kernel_name(given)
            raise UsageError(f"--name {given!r} is not a kernel name (lowercase letters, digits and dashes, starting with "
                             "a letter)", f"use e.g. --name {suggestion}" if suggestion else None)
        return Chosen(given, "--name")
    candidates: list[tuple[str | None, str]] = [
        (discovery.existing.name, "build.toml"),
        (package, "the Python package"),
    ]
    for ext in discovery.extensions:
        candidates.append((ext.package, f"the extension module {ext.module}"))
    candidates.append((discovery.setup_name, "setup(name=...)"))
    candidates += [(ext.leaf, f"the extension module {ext.module}") for ext in discovery.extensions]
    candidates.append((discovery.root.resolve().name, "the folder name"))
    for text, source in candidates:
        if text:
            name = kernel_name(text)
            if name:
                shown = source if name == text else f"{source} ({text})"
                return Chosen(name, shown)
    raise UsageError(f"{discovery.root}: no kernel name can be derived", "pass --name NAME")


def choose_license(discovery: Discovery, given: str | None) -> tuple[Chosen, list[Finding]]:
    if given:
        return Chosen(given, "--license"), []
    if discovery.existing.license:
        return Chosen(discovery.existing.license, "build.toml"), []
    root = discovery.root
    f = facts()
    for name in f["license_files"]:
        text = sources.read_text(root / name)
        if text is None:
            continue
        for entry in f["licenses"]:
            if all(phrase.lower() in text.lower() for phrase in entry["phrases"]):
                return Chosen(entry["id"], name), []
        return Chosen("other", name), [finding(
            "PA131", f"{name} is not a license adopt recognises: written as `other`", file=str(root / name),
            hint="pass --license ID (a Hub license identifier, e.g. apache-2.0, mit, bsd-3-clause) if it is a known one")]
    declared = _declared_license(discovery)
    if declared:
        return Chosen(declared[0], declared[1]), []
    return Chosen("unknown", "none found"), [finding(
        "PA131", "no LICENSE file and no declared license: written as `unknown`", file=str(root),
        hint="pass --license ID (e.g. apache-2.0, mit, bsd-3-clause): the Hub card shows it")]


def _declared_license(discovery: Discovery) -> tuple[str, str] | None:
    names = facts()["license_names"]
    text = sources.read_text(discovery.root / "pyproject.toml")
    if text:
        try:
            project = tomllib.loads(text).get("project") or {}
        except tomllib.TOMLDecodeError:
            project = {}
        value = project.get("license")
        if isinstance(value, dict):
            value = value.get("text")
        if isinstance(value, str) and value.strip().lower() in names:
            return names[value.strip().lower()], "pyproject.toml"
    return None


def choose_version(discovery: Discovery, given: int | None) -> tuple[Chosen, list[Finding]]:
    if given is not None:
        return Chosen(given, "--version"), []
    if discovery.existing.version is not None:
        return Chosen(discovery.existing.version, "build.toml"), []
    return Chosen(1, "default"), [finding("PA132", "version 1 (the Hub branch v1): pass --version N to choose another",
                                          file=str(discovery.root))]


def python_identifier(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_]\w*", text))
