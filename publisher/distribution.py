"""publisher's own distribution and its requirements: the one source of the
pins other modules need (the `kernels` client a test environment gets, what
the Docker build image installs), so pyproject.toml states each pin once.
Found by the `publisher` import package it installs rather than by its name,
which is not ours alone: PyPI's `publisher` is an unrelated project that
installs a package of that name too."""

from __future__ import annotations

from functools import lru_cache
from importlib.metadata import Distribution, distribution, packages_distributions

from packaging.requirements import Requirement

from publisher.errors import EnvironmentProblem

_PACKAGE = "publisher"


def _ours(dist: Distribution) -> bool:
    """Ours declares the `publisher` command on this package (the unrelated project does not)."""
    return any(ep.group == "console_scripts" and ep.value.startswith(f"{_PACKAGE}.") for ep in dist.entry_points)


@lru_cache(maxsize=1)
def requirements() -> tuple[str, ...]:
    """Our runtime requirements (no extras), as pip writes them."""
    for name in dict.fromkeys(packages_distributions().get(_PACKAGE, [])):
        dist = distribution(name)
        if _ours(dist):
            return tuple(r for r in dist.requires or [] if "extra ==" not in r)
    raise EnvironmentProblem("publisher's package metadata is missing (it runs without being installed)",
                             "install it: pip install kernel-publisher (or pip install -e . in a checkout)")


def requirement(name: str) -> str:
    """Our requirement on `name`, e.g. "kernels==0.17.2"."""
    for text in requirements():
        if Requirement(text).name.lower() == name.lower():
            return text
    raise EnvironmentProblem(f"publisher's package metadata does not require {name}", "reinstall publisher")
