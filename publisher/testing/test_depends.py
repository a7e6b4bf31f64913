"""What a project's tests need besides torch, kernels and pytest: the
`pythonCheckInputs` of its flake.nix, kernel-builder's convention
(`pythonCheckInputs = pkgs: with pkgs; [ einops numpy ];`, or
`ps: [ ps.einops ]`), read statically and mapped to PyPI names through
resources/test_depends.yaml; what kernel-builder's test shells hold without a
declaration (the same file's `implicit:`); and the variant's own
`python-depends`, without which `kernels` does not load it."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import yaml

from publisher.data import data_path
from publisher.project import resources

_DATA = data_path("test_depends.yaml")
_CHECK_INPUTS = re.compile(r"\bpythonCheckInputs\s*=\s*(?:(\w+)\s*:\s*)?(?:with\s+\w+\s*;\s*)?\[(?P<body>[^\]]*)\]", re.S)
_ATTR = re.compile(r"^(?:\w+\.)?([A-Za-z_][\w-]*)$")


@lru_cache(maxsize=1)
def _data() -> dict:
    return yaml.safe_load(_DATA.read_text())


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"#[^\n]*", " ", text)


def declared_test_depends(project_root: Path | None) -> tuple[str, ...]:
    """PyPI requirements for the project's tests, in the order declared."""
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
