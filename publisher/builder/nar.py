"""The Nix archive (NAR) hash of a folder: what Nix's fetchers pin (`hash =
"sha256-..."` in fetchFromGitHub), so a source upstream pins can be checked
here with upstream's own hash, without Nix.

NAR, as Nix writes it: every string is its length (8 bytes, little-endian),
its bytes, and zero padding to a multiple of 8. A node is `(` `type` and then
`regular` [`executable` ``] `contents` <bytes>, `symlink` `target` <target>,
or `directory` followed by one `entry` `(` `name` <name> `node` <node> `)` per
child, sorted by name (bytewise); then `)`. The archive is `nix-archive-1`
followed by the root node. Only a file's owner-executable bit is recorded."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from pathlib import Path

CHUNK = 1 << 20


class _Writer:
    def __init__(self) -> None:
        self.digest = hashlib.sha256()

    def string(self, data: bytes) -> None:
        self.digest.update(len(data).to_bytes(8, "little"))
        self.digest.update(data)
        self.digest.update(b"\0" * (-len(data) % 8))

    def file(self, path: bytes, size: int) -> None:
        self.digest.update(size.to_bytes(8, "little"))
        written = 0
        with open(path, "rb") as fh:
            while chunk := fh.read(CHUNK):
                self.digest.update(chunk)
                written += len(chunk)
        if written != size:
            raise OSError(f"{os.fsdecode(path)} changed while it was hashed")
        self.digest.update(b"\0" * (-size % 8))


def _node(out: _Writer, path: bytes) -> None:
    info = os.lstat(path)
    out.string(b"(")
    out.string(b"type")
    if stat.S_ISLNK(info.st_mode):
        out.string(b"symlink")
        out.string(b"target")
        out.string(os.readlink(path))
    elif stat.S_ISREG(info.st_mode):
        out.string(b"regular")
        if info.st_mode & stat.S_IXUSR:
            out.string(b"executable")
            out.string(b"")
        out.string(b"contents")
        out.file(path, info.st_size)
    elif stat.S_ISDIR(info.st_mode):
        out.string(b"directory")
        for name in sorted(os.listdir(path)):
            out.string(b"entry")
            out.string(b"(")
            out.string(b"name")
            out.string(name)
            out.string(b"node")
            _node(out, os.path.join(path, name))
            out.string(b")")
    else:
        raise OSError(f"{os.fsdecode(path)}: a NAR holds only files, folders and symlinks")
    out.string(b")")


def nar_sha256(path: Path) -> str:
    """The folder's (or file's) NAR hash in Nix's SRI form, `sha256-<base64>`."""
    out = _Writer()
    out.string(b"nix-archive-1")
    _node(out, os.fsencode(path))
    return "sha256-" + base64.b64encode(out.digest.digest()).decode("ascii")
