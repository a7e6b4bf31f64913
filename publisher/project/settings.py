"""publisher.toml: publisher's own settings for a project, beside build.toml
(which admits upstream's keys only):

    platforms = ["x86_64-linux"]   # build only for these (default: every platform of the matrix)
    hub-cache-trust = ["my-org"]   # `build` may reuse binaries from these owners' (or ORG/NAME) repos
    test-depends = ["scipy>=1.11"] # what the project's tests import besides torch and kernels (pip requirements)

Upstream expresses the same restriction in Nix code (a flake's `torchVersions`
filter), which cannot be read without evaluating it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from packaging.requirements import InvalidRequirement, Requirement

from publisher.codes import finding
from publisher.findings import Finding
from publisher.hub_names import is_trust_entry
from publisher.plan.variants import Platform, all_platforms

FILE_NAME = "publisher.toml"
_KEYS = ("platforms", "hub-cache-trust", "test-depends")


@dataclass(frozen=True)
class Settings:
    platforms: tuple[str, ...] | None = None  # None: every platform of the matrix
    hub_cache_trust: tuple[str, ...] = ()  # owners (ORG) or repos (ORG/NAME) whose binaries a build may reuse
    test_depends: tuple[str, ...] = ()  # pip requirements the project's tests need


def read_settings(root: Path | None) -> tuple[Settings, list[Finding]]:
    path = Path(root) / FILE_NAME if root is not None else None
    if path is None or not path.is_file():
        return Settings(), []
    file = str(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        return Settings(), [finding("PB501", f"{FILE_NAME} cannot be read: {err}", file=file,
                                    hint="fix the TOML syntax")]
    problems = [finding("PB501", f"unknown key `{key}`", file=file, field=key,
                        hint=f"{FILE_NAME} knows: {', '.join(_KEYS)}") for key in data if key not in _KEYS]
    trust, trust_problems = _trust(data.get("hub-cache-trust"), file)
    problems += trust_problems
    test_depends, depends_problems = _requirements(data.get("test-depends"), file)
    problems += depends_problems
    platforms = data.get("platforms")
    if platforms is None:
        return Settings(hub_cache_trust=trust, test_depends=test_depends), problems
    if not isinstance(platforms, list) or not platforms or not all(isinstance(p, str) for p in platforms):
        return Settings(hub_cache_trust=trust, test_depends=test_depends), problems + [finding(
            "PB501", "`platforms` must be a non-empty list of platform names", file=file, field="platforms",
            hint=f"e.g. platforms = [\"x86_64-linux\"]; known: {', '.join(all_platforms())}")]
    for name in platforms:
        try:
            Platform.parse(name)
        except ValueError as err:
            problems.append(finding("PB501", str(err), file=file, field="platforms",
                                    hint=f"known platforms: {', '.join(all_platforms())}"))
    return Settings(tuple(dict.fromkeys(platforms)), trust, test_depends), problems


def _requirements(value: object, file: str) -> tuple[tuple[str, ...], list[Finding]]:
    """`test-depends`: a list of pip requirements (PEP 508)."""
    if value is None:
        return (), []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return (), [finding("PB501", "`test-depends` must be a list of pip requirements", file=file,
                            field="test-depends", hint='e.g. test-depends = ["numpy", "scipy>=1.11"]')]
    problems = []
    for text in value:
        try:
            Requirement(text)
        except InvalidRequirement as err:
            problems.append(finding("PB501", f"`test-depends`: `{text}` is not a pip requirement ({err})", file=file,
                                    field="test-depends", hint='write each as pip takes it, e.g. "scipy>=1.11"'))
    return (tuple(dict.fromkeys(value)) if not problems else ()), problems


def _trust(value: object, file: str) -> tuple[tuple[str, ...], list[Finding]]:
    """`hub-cache-trust`: a list of owners or repo ids."""
    if value is None:
        return (), []
    if isinstance(value, list) and all(isinstance(v, str) and is_trust_entry(v) for v in value):
        return tuple(dict.fromkeys(value)), []
    return (), [finding("PB501", "`hub-cache-trust` must be a list of Hub owners (ORG) or repo ids (ORG/NAME)",
                        file=file, field="hub-cache-trust", hint='e.g. hub-cache-trust = ["my-org"]')]
