"""What a push changes on the version branch: per variant, the files to add,
delete and leave alone, and the bytes to send. Comparing local hashes with the
remote tree (LFS sha256, or git blob sha1 for regular files) is what makes an
unchanged re-push a no-op and a one-variant change upload that variant's
changed files only.

Upstream's uploader does the same set of operations (add build/<variant>/...,
delete stale files under the pushed variants' prefixes, everything under
build/ on a new branch, keep other variants; benchmarks/benchmark*.py likewise),
but in batches of 1,000 commits; here it is one commit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from publisher import git
from publisher.push.hub_client import RemoteFile, Upload

ADD, DELETE, UNCHANGED = "add", "delete", "unchanged"


@dataclass(frozen=True)
class LocalFile:
    repo_path: str
    local_path: Path
    size: int
    sha256: str

    @classmethod
    def read(cls, repo_path: str, local_path: Path, sha256: str | None = None) -> LocalFile:
        """`sha256`: the hash the gate has just verified, so the file is not read again for it."""
        if sha256 is None:
            sha256 = hashlib.sha256(local_path.read_bytes()).hexdigest()
        return cls(repo_path, local_path, local_path.stat().st_size, sha256)

    @cached_property
    def git_sha1(self) -> str:
        """Only needed against a regular (non-LFS) remote file: computed then."""
        return git.blob_id(self.local_path.read_bytes())

    def matches(self, remote: RemoteFile | None) -> bool:
        if remote is None:
            return False
        if remote.lfs_sha256 is not None:
            return remote.lfs_sha256 == self.sha256
        return remote.blob_id == self.git_sha1


@dataclass(frozen=True)
class FileOp:
    kind: str  # add, delete, unchanged
    repo_path: str
    size: int  # bytes to send for an add; the local size for unchanged; 0 for delete
    local: LocalFile | None = None


@dataclass(frozen=True)
class GroupPlan:
    """The operations of one variant (name = variant) or of benchmarks/."""

    name: str
    ops: tuple[FileOp, ...]

    def of(self, kind: str) -> tuple[FileOp, ...]:
        return tuple(op for op in self.ops if op.kind == kind)

    @property
    def bytes_to_send(self) -> int:
        return sum(op.size for op in self.of(ADD))

    def summary(self) -> dict:
        return {
            "added": [op.repo_path for op in self.of(ADD)],
            "deleted": [op.repo_path for op in self.of(DELETE)],
            "unchanged": len(self.of(UNCHANGED)),
            "bytes": self.bytes_to_send,
        }


@dataclass(frozen=True)
class PushPlan:
    repo_id: str
    branch: str
    branch_exists: bool
    parent_commit: str | None  # the commit the plan was made against (main's head for a new branch)
    groups: tuple[GroupPlan, ...]
    kept_variants: tuple[str, ...] = field(default=())  # on the branch, not part of this push
    remote: Mapping[str, RemoteFile] = field(default_factory=dict, repr=False)  # files at parent_commit
    branches: Mapping[str, str] = field(default_factory=dict, repr=False)  # the repo's branches at plan time

    @property
    def changes(self) -> tuple[FileOp, ...]:
        return tuple(op for g in self.groups for op in g.ops if op.kind in (ADD, DELETE))

    @property
    def is_noop(self) -> bool:
        """Nothing to do; a new version branch always has to be created."""
        return self.branch_exists and not self.changes

    @property
    def bytes_to_send(self) -> int:
        return sum(g.bytes_to_send for g in self.groups)

    def uploads(self) -> list[Upload]:
        return [Upload(op.repo_path, str(op.local.local_path), op.local.sha256) if op.local
                else Upload(op.repo_path, None) for op in self.changes]

    def expected(self) -> dict[str, LocalFile]:
        """Every file of this push as the branch must hold it afterwards."""
        return {op.repo_path: op.local for g in self.groups for op in g.ops if op.local is not None}

    def deleted(self) -> set[str]:
        return {op.repo_path for op in self.changes if op.kind == DELETE}

    def to_dict(self) -> dict:
        return {
            "repo_id": self.repo_id,
            "branch": self.branch,
            "branch_exists": self.branch_exists,
            "parent_commit": self.parent_commit,
            "noop": self.is_noop,
            "bytes": self.bytes_to_send,
            "groups": {g.name: g.summary() for g in self.groups},
            "kept_variants": list(self.kept_variants),
        }


def variant_files(variant_dir: Path, name: str, sha256: Mapping[str, str] | None = None) -> list[LocalFile]:
    """Files of build/<name>/ as they go to the repo (bytecode left out, as `kernels` ignores it);
    `sha256`: relpath -> hash already verified by the gate."""
    known = sha256 or {}
    out = []
    for path in sorted(Path(variant_dir).rglob("*")):
        rel = path.relative_to(variant_dir)
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix not in (".pyc", ".pyo"):
            out.append(LocalFile.read(f"build/{name}/{rel.as_posix()}", path, known.get(rel.as_posix())))
    return out


def benchmark_files(project_root: Path) -> list[LocalFile]:
    """benchmarks/benchmark*.py, the scripts `kernels benchmark` runs (what upstream uploads)."""
    folder = Path(project_root) / "benchmarks"
    if not folder.is_dir():
        return []
    return [LocalFile.read(f"benchmarks/{p.name}", p) for p in sorted(folder.glob("benchmark*.py")) if p.is_file()]


def _group(name: str, local: list[LocalFile], remote: Mapping[str, RemoteFile], stale: list[str]) -> GroupPlan:
    ops = [FileOp(UNCHANGED if f.matches(remote.get(f.repo_path)) else ADD, f.repo_path, f.size, f) for f in local]
    local_paths = {f.repo_path for f in local}
    ops += [FileOp(DELETE, path, 0) for path in sorted(stale) if path not in local_paths]
    return GroupPlan(name, tuple(ops))


def make_plan(repo_id: str, branch: str, variants: Mapping[str, Path], benchmarks: list[LocalFile],
              remote: Mapping[str, RemoteFile], new_branch: bool, parent_commit: str | None,
              sha256: Mapping[str, Mapping[str, str] | None] | None = None,
              branches: Mapping[str, str] | None = None, records: tuple[LocalFile, ...] = ()) -> PushPlan:
    """remote: the files of the branch, or of main when the branch is new (it
    starts from main, and then every build/ and benchmarks/ file there is stale).
    sha256: per variant, the file hashes the gate verified (not computed twice).
    records: files of the release itself at the branch root (the public API record)."""
    groups = []
    for name in sorted(variants):
        prefix = f"build/{name}/"
        stale = [p for p in remote if p.startswith(prefix)]
        groups.append(_group(name, variant_files(variants[name], name, (sha256 or {}).get(name)), remote, stale))
    if new_branch:
        pushed = {f"build/{n}/" for n in variants}
        orphans = [p for p in remote if p.startswith("build/") and not any(p.startswith(x) for x in pushed)]
        if orphans:
            groups.append(_group("build (stale)", [], remote, orphans))
    stale_bench = [p for p in remote if p.startswith("benchmarks/")
                   and (new_branch or p.rsplit("/", 1)[-1].startswith("benchmark"))]
    if benchmarks or stale_bench:
        groups.append(_group("benchmarks", benchmarks, remote, stale_bench))
    if records:
        groups.append(_group("public API", list(records), remote, []))
    kept = sorted({p.split("/")[1] for p in remote if p.startswith("build/") and p.count("/") >= 2} - set(variants))
    return PushPlan(repo_id, branch, not new_branch, parent_commit, tuple(groups), tuple(kept), remote,
                    dict(branches or {}))
