"""What a project's tests declare (and the variant's python-depends) for an
interpreter publisher does not own — the one running publisher, the user's
own environment — installed into an overlay folder publisher owns instead:
`<cache>/test-overlays/<key>`, keyed by the requirements and the interpreter,
made once and reused by every later run. The test process adds it to its path
behind the interpreter's own packages (site.addsitedir, testing/start.py), so nothing
installed there replaces what the interpreter has, and the interpreter itself
is never changed.

Only what the interpreter lacks goes in: each requirement is installed
without its dependencies, then each dependency the interpreter (or the
overlay) does not already satisfy, round by round, so a test dependency that
depends on torch never brings a second torch."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from publisher import runner
from publisher.errors import EnvironmentProblem

MAX_ROUNDS = 12
_COMPLETE = ".publisher-overlay.json"


def overlay_root() -> Path:
    from publisher.toolchains.provision import cache_root

    return cache_root().parent / "test-overlays"


def _installed() -> dict[str, str]:
    """This interpreter's distributions: canonical name -> version."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.setdefault(canonicalize_name(name), dist.version)
    return found


def _satisfied(requirement: Requirement, have: dict[str, str]) -> bool:
    version = have.get(canonicalize_name(requirement.name))
    return version is not None and (not requirement.specifier or requirement.specifier.contains(version, prereleases=True))


def missing(requirements: Iterable[str]) -> list[str]:
    """The requirements this interpreter does not satisfy (name and version), in order."""
    have = _installed()
    out = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            out.append(text)
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        if not _satisfied(requirement, have):
            out.append(text)
    return list(dict.fromkeys(out))


def _key(requirements: Sequence[str]) -> str:
    identity = {"requirements": sorted(requirements), "python": sys.version.split()[0],
                "implementation": sys.implementation.name, "platform": f"{platform.machine()}-{sys.platform}",
                "interpreter": str(Path(sys.prefix).resolve())}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def _overlay_dists(folder: Path) -> list[importlib.metadata.Distribution]:
    return list(importlib.metadata.distributions(path=[str(folder)]))


def _needed_next(folder: Path, have: dict[str, str]) -> list[str]:
    """Dependencies of what the overlay holds that neither it nor the interpreter satisfies."""
    inside = {canonicalize_name(d.metadata["Name"]): d.version for d in _overlay_dists(folder) if d.metadata}
    both = {**have, **inside}
    needed: dict[str, None] = {}
    for dist in _overlay_dists(folder):
        for text in dist.requires or ():
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            if not _satisfied(requirement, both):
                needed.setdefault(str(requirement).split(";")[0].strip(), None)
    return list(needed)


def _install(folder: Path, requirements: list[str], log: Path | None) -> runner.RunResult:
    from publisher.toolchains.provision import uv_path

    uv = uv_path()
    if uv:
        argv = [uv, "pip", "install", "--quiet", "--no-deps", "--python", sys.executable, "--target", str(folder)]
        # pip's settings for where packages come from hold for uv too (uv reads only its own)
        argv += [a for links in os.environ.get("PIP_FIND_LINKS", "").split() for a in ("--find-links", links)]
        if os.environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
            argv.append("--no-index")
    else:
        argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                "--no-warn-conflicts", "--target", str(folder)]
    return runner.run(argv + requirements, log=log, timeout=1800)


def ensure_overlay(requirements: Sequence[str], on_line: Callable[[str], None] = lambda line: None,
                   log: Path | None = None) -> Path | None:
    """The overlay holding what this interpreter lacks of `requirements`, made if need be; None when it lacks
    nothing. Raises EnvironmentProblem naming what is missing when it cannot be installed (offline, say)."""
    lacking = missing(requirements)
    if not lacking:
        return None
    folder = overlay_root() / _key(lacking)
    if (folder / _COMPLETE).is_file():
        return folder
    from publisher.toolchains.provision import _reason, locked

    with locked(folder.with_suffix(".lock")):
        if (folder / _COMPLETE).is_file():
            return folder
        on_line(f"installing {', '.join(lacking)} for the tests into {folder} (this interpreter is not changed)")
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        try:
            have = _installed()
            wanted, done = list(lacking), 0
            while wanted and done < MAX_ROUNDS:
                result = _install(tmp, wanted, log)
                if not result.ok:
                    raise EnvironmentProblem(
                        f"the tests need {', '.join(lacking)}, which {sys.executable} lacks, and installing "
                        f"{', '.join(wanted)} into publisher's test overlay failed: {_reason(result.output)}",
                        f"make the package index reachable (publisher installs them into {overlay_root()}, reused "
                        f"by later runs), or install them into that interpreter: {sys.executable} -m pip install "
                        + " ".join(repr(r) for r in lacking))
                wanted, done = _needed_next(tmp, have), done + 1
            (tmp / _COMPLETE).write_text(json.dumps({"requirements": lacking}) + "\n")
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder
