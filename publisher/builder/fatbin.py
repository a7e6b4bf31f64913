"""The GPU code a compiled library carries, read from the binary itself: the
fat binaries in its ELF `.nv_fatbin` section, each a header and entries, one
per SASS cubin or PTX text, whose headers name the architecture (what
`cuobjdump --list-elf/--list-ptx` lists; only headers are read, so compressed
payloads need no decompressing). Then the check that metadata.json's
`backend.archs` says exactly that, in upstream's notation: `X.Y` (SASS for
sm_XY), `X.Ya`/`X.Yf` (arch- and family-specific SASS), `+PTX` (PTX of that
architecture too)."""

from __future__ import annotations

import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path

_ELF_MAGIC = b"\x7fELF"
_FATBIN_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries that follow
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
_ENTRY_ARCH = 28  # offset of the u32 architecture (major * 10 + minor) in an entry header
_ENTRY_FLAGS = 40  # offset of the u32 flags
_KINDS = {1: "ptx", 2: "sass"}  # other kinds (LTO IR) are not code the driver runs as is
_ARCH_SPECIFIC, _FAMILY_SPECIFIC = 0x100000, 0x200000
_CAPABILITY = re.compile(r"(\d+)\.(\d+)([af]?)(\+PTX)?")


@dataclass(frozen=True)
class DeviceCode:
    """What one library (or a variant's libraries together) carries: architectures as `8.0`, `9.0a`, `10.0f`."""

    sass: frozenset[str]
    ptx: frozenset[str]

    def archs(self) -> tuple[str, ...]:
        """In metadata.json's notation: each SASS architecture, `+PTX` where its PTX is there too (and PTX
        alone as `+PTX`, the closest the notation comes)."""
        names = {a: a + ("+PTX" if a in self.ptx else "") for a in self.sass}
        names.update({a: a + "+PTX" for a in self.ptx - self.sass})
        return tuple(names[a] for a in sorted(names, key=_order))

    def __or__(self, other: DeviceCode) -> DeviceCode:
        return DeviceCode(self.sass | other.sass, self.ptx | other.ptx)


NONE = DeviceCode(frozenset(), frozenset())


def _order(arch: str) -> tuple[int, int, str]:
    major, minor = arch.rstrip("af").split(".")
    return int(major), int(minor), arch[len(major) + len(minor) + 1:]


def _sections(data: bytes) -> dict[str, tuple[int, int]]:
    """ELF64 little-endian section name -> (offset, size)."""
    if data[:4] != _ELF_MAGIC or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name, _type, _flags, _addr, offset, size in headers:
        start = names_at + name
        out[data[start:data.find(b"\0", start)].decode(errors="replace")] = (offset, size)
    return out


def read_device_code(library: Path) -> DeviceCode:
    """The SASS and PTX architectures in `library` (NONE when it carries no GPU code); ValueError when it
    is not an ELF file or its fat binary is malformed. Mapped, not read: a library can be hundreds of MiB."""
    with open(library, "rb") as fh:
        if fh.read(4) != _ELF_MAGIC:
            raise ValueError(f"{library}: not an ELF file")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _device_code(library, data)


def _device_code(library: Path, data) -> DeviceCode:
    where = _sections(data).get(".nv_fatbin")
    if where is None:
        return NONE
    start, size = where
    stop = start + size
    sass: set[str] = set()
    ptx: set[str] = set()
    pos = start
    while pos + _CONTAINER.size <= stop:
        magic, _version, header, entries = _CONTAINER.unpack_from(data, pos)
        if magic != _FATBIN_MAGIC:
            pos += 8  # containers are 8-byte aligned; padding between them
            continue
        entry, end = pos + header, pos + header + entries
        if end > stop:
            raise ValueError(f"{library}: a fat binary runs past the end of .nv_fatbin")
        while entry + _ENTRY_FLAGS + 4 <= end:
            kind, _version, entry_header, payload = _ENTRY.unpack_from(data, entry)
            if entry_header < _ENTRY_FLAGS + 4:
                raise ValueError(f"{library}: a fat binary entry header of {entry_header} bytes")
            (number,) = struct.unpack_from("<I", data, entry + _ENTRY_ARCH)
            (flags,) = struct.unpack_from("<I", data, entry + _ENTRY_FLAGS)
            suffix = "a" if flags & _ARCH_SPECIFIC else "f" if flags & _FAMILY_SPECIFIC else ""
            arch = f"{number // 10}.{number % 10}{suffix}"
            if _KINDS.get(kind) == "sass":
                sass.add(arch)
            elif _KINDS.get(kind) == "ptx":
                ptx.add(arch)
            entry += entry_header + payload
        pos = end
    return DeviceCode(frozenset(sass), frozenset(ptx))


def declared(archs: tuple[str, ...]) -> DeviceCode:
    """The code metadata.json's archs promise: SASS for each, PTX for each `+PTX`."""
    sass, ptx = set(), set()
    for arch in archs:
        m = _CAPABILITY.fullmatch(arch)
        if m is None:
            continue  # not CUDA notation: `kernels` ignores it too
        name = f"{m[1]}.{m[2]}{m[3]}"
        sass.add(name)
        if m[4]:
            ptx.add(name)
    return DeviceCode(frozenset(sass), frozenset(ptx))


def variant_code(variant_dir: Path) -> DeviceCode | None:
    """The GPU code of every ELF library of a variant together; None when it has no library publisher
    can read (Python-only, or a platform that is not ELF)."""
    libraries = [p for p in sorted(Path(variant_dir).rglob("*.so")) if p.is_file()]
    readable = [p for p in libraries if _is_elf(p)]
    if not readable:
        return None
    code = NONE
    for library in readable:
        code = code | read_device_code(library)
    return code


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == _ELF_MAGIC


def archs_difference(archs: tuple[str, ...], code: DeviceCode) -> list[str]:
    """How metadata.json's `archs` and the binary's code differ (empty: they agree)."""
    promised = declared(archs)
    out = [f"declares {a} but the library has no SASS for sm_{a.replace('.', '')}"
           for a in sorted(promised.sass - code.sass, key=_order)]
    out += [f"declares {a}+PTX but the library has no PTX for compute_{a.replace('.', '')}"
            for a in sorted(promised.ptx - code.ptx, key=_order)]
    out += [f"the library carries SASS for sm_{a.replace('.', '')} that archs does not declare"
            for a in sorted(code.sass - promised.sass, key=_order)]
    out += [f"the library carries PTX for compute_{a.replace('.', '')} that archs does not declare (as {a}+PTX)"
            for a in sorted(code.ptx - promised.ptx, key=_order)]
    return out


def archs_problems(variant_dir: Path, metadata: dict) -> list[str]:
    """For a CUDA variant: how its metadata.json's `backend.archs` and its libraries' code differ."""
    backend = metadata.get("backend") or {}
    if backend.get("type") != "cuda":
        return []
    try:
        code = variant_code(variant_dir)
    except (OSError, ValueError) as err:
        return [f"its GPU code cannot be read: {err}"]
    if code is None:
        return []
    archs = tuple(a for a in backend.get("archs") or () if isinstance(a, str))
    found = archs_difference(archs, code)
    if found:
        found.append(f"the library carries {', '.join(code.archs()) or 'no GPU code'}; archs says "
                     f"{', '.join(archs) or 'nothing'}")
    return found
