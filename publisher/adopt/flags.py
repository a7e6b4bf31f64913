"""A build script's compiler flags, sorted into what build.toml takes over
(cxx-flags, cuda-flags), what becomes cuda-capabilities or include folders,
and what the build gives anyway (resources/adopt.yaml says which)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from publisher.data import read_yaml


@cache
def _rules() -> dict:
    return read_yaml("adopt.yaml")["flags"]


@dataclass(frozen=True)
class SortedFlags:
    kept: tuple[str, ...]
    archs: tuple[str, ...]  # capabilities named by -gencode / -arch (e.g. "8.0", "9.0+PTX")
    includes: tuple[str, ...]  # -I folders
    dropped: tuple[str, ...]
    arch_defaults: bool = False  # -arch=native/all: the toolkit's defaults


def _logical(flags: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(flag with its value joined by '=', the words as given) for each flag."""
    takes = set(_rules()["takes_value"])
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(flags):
        word = flags[i]
        if word in takes and i + 1 < len(flags):
            out.append((f"{word}={flags[i + 1]}", [word, flags[i + 1]]))
            i += 2
        else:
            out.append((word, [word]))
            i += 1
    return out


def sort_flags(flags: Sequence[str]) -> SortedFlags:
    rules = _rules()
    kept: list[str] = []
    archs: list[str] = []
    includes: list[str] = []
    dropped: list[str] = []
    defaults = False
    for logical, words in _logical([str(f) for f in flags]):
        if any(logical.startswith(p) for p in rules["arch_prefixes"]) and not logical.startswith("-arch-"):
            found, wants_defaults = _archs(logical)
            archs += found
            defaults = defaults or wants_defaults
            continue
        if logical.startswith("-I") and len(logical) > 2:
            includes.append(logical[2:].lstrip("="))
            continue
        if logical.startswith("-Xcompiler="):
            values = [v for v in re.split(r"[,\s]+", logical.split("=", 1)[1].strip("'\"")) if v]
            values = [v for v in values if v not in rules["drop_xcompiler"] and not v.startswith(("-O", "-std="))]
            if not values:
                dropped.append(" ".join(words))
                continue
            kept += ["-Xcompiler", ",".join(values)] if len(words) == 2 else [f"-Xcompiler={','.join(values)}"]
            continue
        if logical in rules["drop_exact"] or any(logical.startswith(p) for p in rules["drop_prefixes"]):
            dropped.append(" ".join(words))
            continue
        kept += words
    return SortedFlags(tuple(kept), tuple(dict.fromkeys(archs)), tuple(includes), tuple(dropped), defaults)


def _macros(flags: Sequence[str], switch: str) -> set[str]:
    """Macros `-D`/`-U` (switch) names in flags, as `-DX`, `-D X` or `-DX=1`."""
    out: set[str] = set()
    for i, word in enumerate(flags):
        if word == switch and i + 1 < len(flags):
            out.add(flags[i + 1].split("=", 1)[0])
        elif word.startswith(switch) and len(word) > 2:
            out.add(word[2:].lstrip("=").split("=", 1)[0])
    return out


def as_torch_extension_nvcc(recorded: Sequence[str]) -> list[str]:
    """A CUDA source's nvcc flags as torch.utils.cpp_extension gives them: its defines first (those the
    script does not define itself or undefine), then the script's flags, less the -U of a define
    that is then never given."""
    recorded = [str(f) for f in recorded]
    defaults = list(_rules()["torch_extension_nvcc_defines"])
    undone = _macros(recorded, "-U") & set(defaults)
    given = _macros(recorded, "-D")
    out = [f"-D{m}" for m in defaults if m not in undone and m not in given]
    skip = False
    for i, word in enumerate(recorded):
        if skip:
            skip = False
            continue
        if word == "-U" and i + 1 < len(recorded) and recorded[i + 1] in undone:
            skip = True
            continue
        if word.startswith("-U") and word[2:].lstrip("=") in undone:
            continue
        out.append(word)
    return out


_SM = re.compile(r"(sm|compute|lto)_(\d+)([af]?)")


def _cap(digits: str, suffix: str) -> str:
    return f"{digits[:-1]}.{digits[-1]}{suffix}"


def _archs(logical: str) -> tuple[list[str], bool]:
    """Capabilities one architecture flag names: sm_XX -> X.X, compute_XX -> X.X+PTX; -arch=sm_XX alone
    is nvcc's shorthand for both. (capabilities, whether the flag asks for the toolkit's own list)."""
    flag, _, value = logical.partition("=")
    value = value.strip("'\" ")
    if value in ("native", "all", "all-major", ""):
        return [], True
    if flag in ("-gencode", "--generate-code"):
        code = re.search(r"code=\[?([^\]]*)\]?", value)
        names = code.group(1) if code else value
    else:
        names = value
    out: list[str] = []
    for kind, digits, suffix in _SM.findall(names):
        cap = _cap(digits, suffix)
        if kind == "compute" or (flag in ("-arch", "--gpu-architecture") and kind == "sm"):
            out.append(cap + "+PTX")
        else:
            out.append(cap)
    return out, False


def merge_capabilities(lists: Iterable[str]) -> tuple[str, ...]:
    """One list in kernel-builder's form: each capability once, +PTX where any source asked for PTX, sorted."""
    caps: dict[str, bool] = {}
    for item in lists:
        item = item.strip().replace(" ", "")
        m = re.fullmatch(r"(\d+)\.(\d+)([af]?)(\+PTX)?", item, re.I)
        if not m:
            continue
        key = f"{m.group(1)}.{m.group(2)}{m.group(3)}"
        caps[key] = caps.get(key, False) or bool(m.group(4))

    def order(key: str) -> tuple[int, int, str]:
        major, rest = key.split(".")
        minor = re.match(r"\d+", rest).group(0)
        return int(major), int(minor), rest[len(minor):]

    return tuple(k + ("+PTX" if caps[k] else "") for k in sorted(caps, key=order))


def unknown_arch_names(entries: Iterable[str]) -> list[str]:
    """TORCH_CUDA_ARCH_LIST entries that are not capabilities (`Ampere`, `8.6 +PTX` is fine)."""
    return [e for e in entries if not re.fullmatch(r"\d+\.\d+[af]?(\+PTX)?", e.strip().replace(" ", ""), re.I)]
