"""The header publisher forces into every compiled unit so that a build on a
newer glibc asks for nothing newer than manylinux_2_28: resources/glibc_compat.h
with the `.symver` bindings of resources/glibc_compat.yaml written in (one line
per function and architecture). glibc_compat.c, linked into every variant,
defines what cannot be bound to an older version (glibc 2.32's
__libc_single_threaded, 2.38's __isoc23_* functions)."""

from __future__ import annotations

from functools import cache

from publisher.data import DATA_DIR, load_yaml

HEADER = DATA_DIR / "glibc_compat.h"
SOURCE = DATA_DIR / "glibc_compat.c"
_TABLE = DATA_DIR / "glibc_compat.yaml"
_PLACE = "// @SYMVERS@"
# each architecture's first glibc version: nothing there is older
_BASE = {"__x86_64__": (2, 2, 5), "__aarch64__": (2, 17)}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@cache
def bindings() -> dict[str, str]:
    """function -> the older version it is bound to on x86_64 ("2.2.5")."""
    return {name: str(row["old"]) for row in load_yaml(_TABLE.read_text())["symbols"] for name in row["names"]}


@cache
def header_text() -> str:
    lines = []
    for i, (macro, base) in enumerate(_BASE.items()):
        lines.append(f"#{'if' if i == 0 else 'elif'} defined({macro})")
        for name, old in bindings().items():
            version = ".".join(map(str, max(_version(old), base)))
            lines.append(f'__asm__(".symver {name},{name}@GLIBC_{version}");')
    lines.append("#endif")
    text = HEADER.read_text()
    if _PLACE not in text:
        raise RuntimeError(f"{HEADER} lacks the line {_PLACE}")
    return text.replace(_PLACE, "\n".join(lines))
