"""Version strings (build.toml bounds, matrix cells) and the one rule that
says whether a version lies within [minver, maxver].

Upstream (kernels-data's `Version<2>`, kernels >= 0.17, shared by
kernel-builder and the client) reads every bound as exactly two numbers,
MAJOR.MINOR: the string is trimmed of whitespace, split at dots, each part is
an unsigned 64-bit integer as Rust parses one (an optional `+`, ASCII
digits), and there must be two parts. Nothing is normalised: "13" and
"13.0.0" are refused, not read as 13.0. check, plan and the matrix all read
versions through `parse_version`, and compare through `within`, so they
cannot disagree on a cell."""

from __future__ import annotations

import re

PARTS = 2
U64_MAX = 2**64 - 1
_NUMBER = re.compile(r"\+?[0-9]+", re.ASCII)
# Unicode White_Space: what Rust's str::trim strips (Python's str.strip also strips \x1c-\x1f)
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
             "\u2028\u2029\u202f\u205f\u3000"


def version_problem(text: str) -> str | None:
    """Why upstream refuses `text` as a version bound (its reasons, in its
    order), or None when it reads it."""
    trimmed = text.strip(WHITESPACE)
    if not trimmed:
        return "is empty"
    parts = trimmed.split(".")
    if not all(_NUMBER.fullmatch(p) and int(p) <= U64_MAX for p in parts):
        return "must consist of numbers separated by dots"
    if len(parts) != PARTS:
        return f"has {len(parts)} part{'s' if len(parts) != 1 else ''}; upstream reads exactly two (MAJOR.MINOR)"
    return None


def parse_version(text: object) -> tuple[int, int] | None:
    """`12.8` -> (12, 8); None for anything upstream refuses ("12", "12.8.0", "12.x")."""
    if not isinstance(text, str) or version_problem(text) is not None:
        return None
    major, minor = (int(p) for p in text.strip(WHITESPACE).split("."))
    return major, minor


def two_part_repair(text: str) -> str | None:
    """The two-part bound that means exactly what `text` meant before kernels
    0.17 (trailing zeros did not count), when there is one: "13" -> "13.0",
    "2.13.0" -> "2.13". None when `text` is fine, not numbers, or names a
    patch release ("12.8.1": upstream compares MAJOR.MINOR only, so no
    two-part bound says the same)."""
    problem = version_problem(text)
    if problem is None or not problem.startswith("has "):
        return None
    parts = [str(int(p)) for p in text.strip(WHITESPACE).split(".")]
    if len(parts) == 1:
        return f"{parts[0]}.0"
    if any(p != "0" for p in parts[PARTS:]):
        return None
    return ".".join(parts[:PARTS])


def version_key(text: str) -> tuple[int, ...]:
    """A sort key for a version-like string; non-numeric parts are ignored."""
    return tuple(int(p) for p in str(text).split(".") if p.isdigit())


def within(version: str, minver: object = None, maxver: object = None) -> bool:
    """Inclusive bounds, MAJOR.MINOR against MAJOR.MINOR. A bound that is
    absent or not a two-part version (check reports that as PB109) does not
    constrain; a version that is not one is outside."""
    v = parse_version(version)
    low = parse_version(minver)
    high = parse_version(maxver)
    return v is not None and (low is None or v >= low) and (high is None or v <= high)
