"""Repositories on disk for the Hub-compatible server, with git's object model.

<data>/repos/<type>/<namespace>/<name>/
    repo.json      {"private": bool}
    refs.json      {"heads": {...}, "tags": {...}, "prs": {...}}  (replaced atomically)
    objects/ab/cdef...   zlib-compressed git objects (blob, tree, commit)
    lfs/ab/cdef...       LFS payloads, named by sha256

Commit ids are real git ids (sha1 over the commit object, which names the
tree and the parent). A commit writes its objects first and then swaps
refs.json under the repository lock, so a reader, or a server killed at any
moment, only ever sees complete commits.
"""

from __future__ import annotations

import base64
import fcntl
import fnmatch
import hashlib
import io
import json
import os
import re
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from publisher import git
from publisher.errors import HubError
from publisher.hub_names import repo_id_problem

REPO_TYPES = ("model", "dataset", "space", "kernel")
_SHA1 = re.compile(r"[0-9a-f]{40}")
_LFS_ALWAYS = 10 * 1024 * 1024  # files above this size always go through LFS
# The default .gitattributes of a new Hub repo, shortened to the patterns that matter here.
_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in ("*.bin", "*.pt", "*.pth", "*.safetensors", "*.so", "*.tar.*", "*.zip", "*.npz", "*.png")
)



@dataclass(frozen=True)
class Entry:
    """A file at a commit: git blob id, size, and the LFS pointer's target if any."""

    blob: str
    size: int
    lfs_oid: str | None = None

    @property
    def etag(self) -> str:
        return self.lfs_oid or self.blob


@dataclass(frozen=True)
class CommitMeta:
    oid: str
    tree: str
    parents: tuple[str, ...]
    title: str
    message: str
    time: int


def lfs_pointer(oid: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n".encode()


def check_repo_id(repo_id: str) -> tuple[str, str]:
    problem = repo_id_problem(repo_id)
    if problem:
        raise HubError(400, f"Invalid repo id {repo_id!r}: {problem}")
    namespace, name = repo_id.split("/")
    return namespace, name


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Repo:
    def __init__(self, root: Path, repo_type: str, repo_id: str, lock: threading.Lock):
        self.root = root
        self.type = repo_type
        self.id = repo_id
        self._lock = lock
        self._cache: dict[str, tuple[dict[str, Entry], dict[str, str]]] = {}

    # -- settings and refs -------------------------------------------------
    @property
    def private(self) -> bool:
        return bool(json.loads((self.root / "repo.json").read_text()).get("private"))

    def refs(self) -> dict[str, dict[str, str]]:
        data = json.loads((self.root / "refs.json").read_text())
        return {"heads": data.get("heads", {}), "tags": data.get("tags", {}), "prs": data.get("prs", {})}

    def _write_refs(self, refs: dict) -> None:
        _atomic_write(self.root / "refs.json", json.dumps(refs, indent=1, sort_keys=True).encode())

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Serialise writers: a thread lock in this server, a file lock across processes."""
        with self._lock, open(self.root / "lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def resolve(self, revision: str) -> str:
        """Branch, tag, refs/heads/<b>, refs/tags/<t>, refs/pr/<n> or a full commit id -> commit id."""
        refs = self.refs()
        if revision.startswith("refs/heads/") and revision[11:] in refs["heads"]:
            return refs["heads"][revision[11:]]
        if revision.startswith("refs/tags/") and revision[10:] in refs["tags"]:
            return refs["tags"][revision[10:]]
        if revision.startswith("refs/pr/") and revision[8:] in refs["prs"]:
            return refs["prs"][revision[8:]]
        if revision in refs["heads"]:
            return refs["heads"][revision]
        if revision in refs["tags"]:
            return refs["tags"][revision]
        if _SHA1.fullmatch(revision) and self._has_object(revision):
            return revision
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def branch_for_write(self, revision: str) -> str:
        name = revision[11:] if revision.startswith("refs/heads/") else revision
        if name not in self.refs()["heads"]:
            raise HubError(404, f"Invalid rev id: {revision} is not a branch", "RevisionNotFound")
        return name

    # -- git objects -------------------------------------------------------
    def _object_path(self, oid: str) -> Path:
        return self.root / "objects" / oid[:2] / oid[2:]

    def _has_object(self, oid: str) -> bool:
        return self._object_path(oid).exists()

    def _write_object(self, kind: str, body: bytes) -> str:
        oid, raw = git.git_object(kind, body)
        path = self._object_path(oid)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(path, zlib.compress(raw, 1))
        return oid

    def _read_object(self, oid: str) -> tuple[str, bytes]:
        raw = zlib.decompress(self._object_path(oid).read_bytes())
        header, _, body = raw.partition(b"\0")
        return header.split(b" ")[0].decode(), body

    def _write_tree(self, files: dict[str, Entry]) -> str:
        children: dict[str, dict[str, Entry] | Entry] = {}
        for path, entry in files.items():
            head, sep, rest = path.partition("/")
            if sep:
                sub = children.setdefault(head, {})
                assert isinstance(sub, dict)
                sub[rest] = entry
            else:
                children[head] = entry
        items = []
        for name, child in children.items():
            if isinstance(child, dict):
                items.append((name + "/", b"40000 " + name.encode(), self._write_tree(child)))
            else:
                items.append((name, b"100644 " + name.encode(), child.blob))
        body = b"".join(mode_name + b"\0" + bytes.fromhex(oid) for _, mode_name, oid in sorted(items))
        return self._write_object("tree", body)

    def _read_tree(self, oid: str, prefix: str, files: dict[str, Entry], dirs: dict[str, str]) -> None:
        _, body = self._read_object(oid)
        i = 0
        while i < len(body):
            nul = body.index(b"\0", i)
            mode, name = body[i:nul].decode().split(" ", 1)
            child = body[nul + 1 : nul + 21].hex()
            i = nul + 21
            if mode == "40000":
                dirs[prefix + name] = child
                self._read_tree(child, prefix + name + "/", files, dirs)
            else:
                files[prefix + name] = self._entry_for_blob(child)

    def _entry_for_blob(self, blob: str) -> Entry:
        _, data = self._read_object(blob)
        if data.startswith(b"version https://git-lfs.github.com/spec/v1\n") and len(data) < 200:
            fields = dict(line.split(" ", 1) for line in data.decode().splitlines() if " " in line)
            return Entry(blob, int(fields["size"]), fields["oid"].removeprefix("sha256:"))
        return Entry(blob, len(data))

    def commit_meta(self, oid: str) -> CommitMeta:
        _, body = self._read_object(oid)
        head, _, message = body.decode().partition("\n\n")
        tree, parents, when = "", [], 0
        for line in head.splitlines():
            key, _, value = line.partition(" ")
            if key == "tree":
                tree = value
            elif key == "parent":
                parents.append(value)
            elif key == "committer":
                when = int(value.rsplit(" ", 2)[-2])
        title, _, rest = message.partition("\n")
        return CommitMeta(oid, tree, tuple(parents), title, rest.strip(), when)

    def _listing(self, commit: str) -> tuple[dict[str, Entry], dict[str, str]]:
        """Files and folders (path -> tree id) at a commit; immutable, so cached."""
        if commit not in self._cache:
            files: dict[str, Entry] = {}
            dirs: dict[str, str] = {}
            self._read_tree(self.commit_meta(commit).tree, "", files, dirs)
            self._cache[commit] = (files, dirs)
        return self._cache[commit]

    def files(self, commit: str) -> dict[str, Entry]:
        return dict(self._listing(commit)[0])

    def folders(self, commit: str) -> dict[str, str]:
        return dict(self._listing(commit)[1])

    def history(self, commit: str) -> list[CommitMeta]:
        metas = []
        oid: str | None = commit
        while oid:
            meta = self.commit_meta(oid)
            metas.append(meta)
            oid = meta.parents[0] if meta.parents else None
        return metas

    def read(self, entry: Entry) -> bytes:
        if entry.lfs_oid:
            return self.lfs_path(entry.lfs_oid).read_bytes()
        return self._read_object(entry.blob)[1]

    def open(self, entry: Entry) -> BinaryIO:
        if entry.lfs_oid:
            return open(self.lfs_path(entry.lfs_oid), "rb")
        return io.BytesIO(self._read_object(entry.blob)[1])

    # -- LFS ---------------------------------------------------------------
    def lfs_path(self, oid: str) -> Path:
        return self.root / "lfs" / oid[:2] / oid[2:]

    def has_lfs(self, oid: str) -> bool:
        return self.lfs_path(oid).exists()

    def lfs_put(self, oid: str, size: int, chunks: Iterator[bytes]) -> None:
        """Store an LFS object, checking its sha256 and size before it becomes visible."""
        if not re.fullmatch(r"[0-9a-f]{64}", oid):
            raise HubError(400, f"Invalid LFS oid {oid!r}")
        path = self.lfs_path(oid)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
        digest, written = hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "wb") as fh:
                for chunk in chunks:
                    digest.update(chunk)
                    written += len(chunk)
                    fh.write(chunk)
            if written != size or digest.hexdigest() != oid:
                raise HubError(400, f"LFS upload rejected: got {written} bytes with sha256 {digest.hexdigest()}, "
                                    f"expected {size} bytes with sha256 {oid}")
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)

    # -- writes ------------------------------------------------------------
    def upload_mode(self, revision_files: dict[str, Entry], path: str, size: int, sample: bytes) -> str:
        """regular or lfs, as the Hub decides: .gitattributes patterns, size, or binary content."""
        if size > _LFS_ALWAYS or b"\0" in sample:
            return "lfs"
        attrs = revision_files.get(".gitattributes")
        patterns = []
        if attrs is not None:
            for line in self.read(attrs).decode(errors="replace").splitlines():
                parts = line.split()
                if len(parts) > 1 and "filter=lfs" in parts[1:]:
                    patterns.append(parts[0])
        name = path.rsplit("/", 1)[-1]
        return "lfs" if any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(path, p) for p in patterns) else "regular"

    def _new_commit(self, files: dict[str, Entry], parent: str | None, title: str, description: str) -> str:
        tree = self._write_tree(files)
        when = int(time.time())
        lines = [f"tree {tree}"] + ([f"parent {parent}"] if parent else [])
        who = "publisher-hub <hub@localhost>"
        lines += [f"author {who} {when} +0000", f"committer {who} {when} +0000", ""]
        message = title + ("\n\n" + description if description else "")
        return self._write_object("commit", ("\n".join(lines) + "\n" + message + "\n").encode())

    def initialise(self) -> None:
        blob = self._write_object("blob", _GITATTRIBUTES.encode())
        commit = self._new_commit({".gitattributes": Entry(blob, len(_GITATTRIBUTES))}, None, "initial commit", "")
        self._write_refs({"heads": {"main": commit}, "tags": {}, "prs": {}})

    def apply_commit(self, revision: str, header: dict, operations: list[tuple[str, dict]], create_pr: bool) -> tuple[str, str | None]:
        """Apply one NDJSON commit all-or-nothing. Returns (commit id, pr number or None)."""
        with self.locked():
            branch = self.branch_for_write(revision)
            head = self.refs()["heads"][branch]
            parent_commit = header.get("parentCommit")
            if parent_commit and parent_commit != head:
                raise HubError(
                    412,
                    f"A commit has happened since: branch '{branch}' is at {head}, not at the parent commit "
                    f"{parent_commit} this commit was based on. Refresh and try again.",
                )
            files = self.files(head)
            for key, value in operations:
                self._apply_operation(files, key, value)
            summary = str(header.get("summary") or "").strip()
            if not summary:
                raise HubError(400, "Commit summary (title) is required")
            commit = self._new_commit(files, head, summary, str(header.get("description") or ""))
            refs = self.refs()
            pr = None
            if create_pr:
                pr = str(max((int(n) for n in refs["prs"]), default=0) + 1)
                refs["prs"][pr] = commit
            else:
                refs["heads"][branch] = commit
            self._write_refs(refs)
            return commit, pr

    def _apply_operation(self, files: dict[str, Entry], key: str, value: dict) -> None:
        path = str(value.get("path", "")).strip("/")
        if not path or ".." in path.split("/"):
            raise HubError(400, f"Invalid path in commit operation: {value.get('path')!r}")
        if key == "file":
            data = base64.b64decode(value.get("content", ""))
            files[path] = Entry(self._write_object("blob", data), len(data))
        elif key == "lfsFile":
            oid = str(value.get("oid", ""))
            if value.get("algo", "sha256") != "sha256" or not self.has_lfs(oid):
                raise HubError(422, f"LFS object {oid} for {path} has not been uploaded; upload it before committing")
            size = self.lfs_path(oid).stat().st_size
            if "size" in value and int(value["size"]) != size:
                raise HubError(422, f"LFS object {oid} for {path} has size {size}, not {value['size']}")
            files[path] = Entry(self._write_object("blob", lfs_pointer(oid, size)), size, oid)
        elif key == "deletedFile":
            if path not in files:
                raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
            del files[path]
        elif key == "deletedFolder":
            for name in [n for n in files if n.startswith(path + "/")]:
                del files[name]
        else:
            raise HubError(400, f"Unknown commit operation {key!r}")

    def create_branch(self, name: str, start: str | None) -> None:
        with self.locked():
            refs = self.refs()
            if name in refs["heads"]:
                raise HubError(409, f"Reference already exists: refs/heads/{name}")
            refs["heads"][name] = self.resolve(start or "main")
            self._write_refs(refs)

    def delete_branch(self, name: str) -> None:
        with self.locked():
            refs = self.refs()
            if name not in refs["heads"]:
                raise HubError(404, f"Invalid rev id: {name}", "RevisionNotFound")
            del refs["heads"][name]
            self._write_refs(refs)

    def create_tag(self, name: str, revision: str) -> None:
        with self.locked():
            refs = self.refs()
            if name in refs["tags"]:
                raise HubError(409, f"Tag already exists: refs/tags/{name}")
            refs["tags"][name] = self.resolve(revision)
            self._write_refs(refs)


class Storage:
    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        (self.data_dir / "repos").mkdir(parents=True, exist_ok=True)
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._repos: dict[tuple[str, str], Repo] = {}
        self._guard = threading.Lock()

    def _root(self, repo_type: str, repo_id: str) -> Path:
        if repo_type not in REPO_TYPES:
            raise HubError(400, f"Invalid repo type {repo_type!r}")
        namespace, name = check_repo_id(repo_id)
        return self.data_dir / "repos" / repo_type / namespace / name

    def _handle(self, repo_type: str, repo_id: str) -> Repo:
        key = (repo_type, repo_id)
        with self._guard:
            if key not in self._repos:
                lock = self._locks.setdefault(key, threading.Lock())
                self._repos[key] = Repo(self._root(repo_type, repo_id), repo_type, repo_id, lock)
            return self._repos[key]

    def get(self, repo_type: str, repo_id: str) -> Repo:
        root = self._root(repo_type, repo_id)
        if not (root / "refs.json").exists():
            raise HubError(404, f"Repository Not Found: {repo_type} {repo_id}", "RepoNotFound")
        return self._handle(repo_type, repo_id)

    def create(self, repo_type: str, repo_id: str, private: bool) -> bool:
        """Create a repo with its initial commit; False if it already existed."""
        root = self._root(repo_type, repo_id)
        repo = self._handle(repo_type, repo_id)
        root.mkdir(parents=True, exist_ok=True)
        with repo.locked():
            if (root / "refs.json").exists():
                return False
            _atomic_write(root / "repo.json", json.dumps({"private": bool(private)}).encode())
            repo.initialise()
            return True
