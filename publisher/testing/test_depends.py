"""What a project's tests need besides torch, kernels and pytest, wherever the
author declared it (resources/test_depends.yaml says where): pyproject.toml
`[dependency-groups] test` (PEP 735), publisher.toml `test-depends`, and the
`pythonCheckInputs` of its flake.nix (kernel-builder's convention,
`pythonCheckInputs = pkgs: with pkgs; [ einops numpy ];`, read statically and
mapped to PyPI names); what kernel-builder's test shells hold without a
declaration (the same file's `implicit:`); the modules every test environment
has anyway (`present:`); and the variant's own `python-depends`, without
which `kernels` does not load it."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from publisher.codes import finding
from publisher.data import data_path, load_yaml
from publisher.findings import Finding
from publisher.project import resources
from publisher.project.settings import read_settings

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

_DATA = data_path("test_depends.yaml")
_CHECK_INPUTS = re.compile(r"\bpythonCheckInputs\s*=\s*(?:(\w+)\s*:\s*)?(?:with\s+\w+\s*;\s*)?\[(?P<body>[^\]]*)\]", re.S)
_ATTR = re.compile(r"^(?:\w+\.)?([A-Za-z_][\w-]*)$")
# PEP 735 groups that hold test dependencies (names normalized as PEP 503 does)
TEST_GROUPS = ("test", "tests")
DECLARE_HINT = ('declare it: pyproject.toml `[dependency-groups] test = ["{req}"]`, or publisher.toml '
                '`test-depends = ["{req}"]` (or flake.nix pythonCheckInputs); `publisher test` installs declared test '
                "dependencies for the run, never into your own interpreter")


@lru_cache(maxsize=1)
def _data() -> dict:
    return load_yaml(_DATA.read_text())


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"#[^\n]*", " ", text)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def flake_test_depends(project_root: Path | None) -> tuple[str, ...]:
    """PyPI requirements named by flake.nix `pythonCheckInputs`."""
    flake = Path(project_root) / "flake.nix" if project_root is not None else None
    if flake is None or not flake.is_file():
        return ()
    try:
        text = _strip_comments(flake.read_text(errors="replace"))
    except OSError:
        return ()
    provided = set(_data()["provided"])
    renames = _data()["pypi"]
    found: dict[str, None] = {}
    for match in _CHECK_INPUTS.finditer(text):
        for token in match.group("body").split():
            attr = _ATTR.match(token)
            if attr and attr.group(1) not in provided:
                found.setdefault(renames.get(attr.group(1), attr.group(1)), None)
    return tuple(found)


def pyproject_test_depends(project_root: Path | None) -> tuple[tuple[str, ...], list[Finding]]:
    """PEP 735 `[dependency-groups]` test (or tests) of the project's pyproject.toml,
    with `{include-group = ...}` followed; findings for what cannot be read."""
    path = Path(project_root) / "pyproject.toml" if project_root is not None else None
    if path is None or not path.is_file():
        return (), []
    file = str(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        return (), [finding("PB410", f"pyproject.toml cannot be read: {err}", file=file,
                            hint="fix the TOML syntax; publisher reads its [dependency-groups] test")]
    groups = data.get("dependency-groups")
    if groups is None:
        return (), []
    if not isinstance(groups, dict):
        return (), [finding("PB410", "`dependency-groups` must be a table of lists", file=file, field="dependency-groups",
                            hint='e.g. [dependency-groups]\\ntest = ["numpy"]')]
    by_name = {_normalize(str(k)): v for k, v in groups.items()}
    found: dict[str, None] = {}
    problems: list[Finding] = []

    def expand(name: str, seen: tuple[str, ...]) -> None:
        items = by_name.get(name)
        field = f"dependency-groups.{name}"
        if not isinstance(items, list):
            problems.append(finding("PB410", f"`{field}` must be a list of requirements", file=file, field=field,
                                    hint='e.g. test = ["numpy", {include-group = "base"}]'))
            return
        for item in items:
            if isinstance(item, dict) and set(item) == {"include-group"} and isinstance(item["include-group"], str):
                included = _normalize(item["include-group"])
                if included in seen or included not in by_name:
                    why = "includes itself" if included in seen else "names no group of the file"
                    problems.append(finding("PB410", f"`{field}`: include-group `{item['include-group']}` {why}",
                                            file=file, field=field, hint="name a group this table defines, once"))
                else:
                    expand(included, (*seen, included))
                continue
            if not isinstance(item, str):
                problems.append(finding("PB410", f"`{field}`: {item!r} is neither a requirement nor an include-group",
                                        file=file, field=field, hint='e.g. "numpy" or {include-group = "base"}'))
                continue
            try:
                Requirement(item)
            except InvalidRequirement as err:
                problems.append(finding("PB410", f"`{field}`: `{item}` is not a requirement ({err})", file=file,
                                        field=field, hint='write each as pip takes it, e.g. "scipy>=1.11"'))
                continue
            found.setdefault(item, None)

    for group in TEST_GROUPS:
        if group in by_name:
            expand(group, (group,))
    return tuple(found), problems


def declared_test_depends(project_root: Path | None) -> tuple[str, ...]:
    """PyPI requirements for the project's tests, from every place they may be declared, in order."""
    settings, _ = read_settings(project_root)
    from_pyproject, _ = pyproject_test_depends(project_root)
    found = dict.fromkeys([*from_pyproject, *settings.test_depends, *flake_test_depends(project_root)])
    return tuple(found)


def implicit_test_depends(compute: str, platform: str) -> tuple[str, ...]:
    """What kernel-builder's test shells hold without a declaration (its torch's own
    dependencies) and PyPI's torch for `compute` on `platform` lacks, as requirements."""
    return tuple(entry["requirement"] for entry in _data()["implicit"]
                 if compute in entry.get("computes", [compute]) and platform in entry.get("platforms", [platform]))


def implicit_requirement(module: str) -> str | None:
    """The requirement that provides `module` (a top-level import name) when kernel-builder's
    test shells hold it without a declaration; None for any other module."""
    top = module.split(".")[0]
    return next((entry["requirement"] for entry in _data()["implicit"] if entry["module"] == top), None)


def always_present(module: str, implicit: bool = True) -> bool:
    """A module every test environment holds without a declaration (torch's, pytest's,
    kernels' dependencies, and with `implicit`, kernel-builder's implicit set)."""
    top = module.split(".")[0]
    return top in _data()["present"] or (implicit and implicit_requirement(top) is not None)


def needed_by(module: str) -> tuple[str, ...]:
    """The modules importing `module` (a dotted name) needs that its package does not install."""
    for prefix, needed in (_data().get("needs") or {}).items():
        if module == prefix or module.startswith(prefix + "."):
            return tuple(needed) if isinstance(needed, list) else (str(needed),)
    return ()


def pypi_name(module: str) -> str:
    """The PyPI project that most likely provides top-level `module`."""
    top = module.split(".")[0]
    return _data()["modules"].get(top) or implicit_requirement(top) or top.replace("_", "-")


def provided_modules(requirements: tuple[str, ...] | list[str]) -> set[str]:
    """Top-level import names the given requirements provide (as far as names tell)."""
    reverse: dict[str, set[str]] = {}
    for module, project in _data()["modules"].items():
        reverse.setdefault(_normalize(project), set()).add(module)
    out: set[str] = set()
    for text in requirements:
        try:
            name = Requirement(text).name
        except InvalidRequirement:
            continue
        out |= reverse.get(_normalize(name), set()) | {name.replace("-", "_"), name.replace("-", "_").lower()}
    return out


def kernel_depends(variant_dir: Path, backend: str) -> tuple[str, ...]:
    """pip requirements for the variant's own `python-depends` (its metadata.json): `kernels`
    refuses to load a variant whose python-depends are not installed, so its test
    environment needs them as a user's does. Names outside the curated list give nothing
    (`check` refuses them before a build)."""
    try:
        names = json.loads((Path(variant_dir) / "metadata.json").read_text()).get("python-depends") or []
    except (OSError, ValueError, AttributeError):
        return ()
    curated = {**resources.general_python_depends(), **resources.backend_python_depends(backend)}
    return tuple(dict.fromkeys(curated[n]["pip"] for n in names if isinstance(n, str) and n in curated))
