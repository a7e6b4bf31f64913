"""Choosing variants by name globs (--variant / --skip, --allow-untested-variant):
one matching rule for plan, test and push. Globs are case-sensitive, as
variant names are."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence


def matches_any(name: str, globs: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, g) for g in globs)


def chosen(names: Iterable[str], include: Sequence[str] = (), skip: Sequence[str] = ()) -> list[str]:
    """The names matching any of `include` (all when empty) and none of `skip`, in order."""
    return [n for n in names if (not include or matches_any(n, include)) and not matches_any(n, skip)]
