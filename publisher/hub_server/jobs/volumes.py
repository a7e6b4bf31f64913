"""Repo volumes of a job, from this server's own storage.

At creation the repo and revision are checked (they exist, the caller may read
them) and the revision is pinned to a commit, so the job sees the files that
were there when it was asked for. When the job starts, the files of that commit
under `path` are copied into a folder of the job's own, which the executor
mounts read-only at the volume's mountPath; the folder goes when the job ends.
A copy, not a link into the storage: nothing a job does to its mount (a root
process can remount it read-write) reaches the repository.

Buckets are refused: this server has no buckets.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from publisher.errors import HubError
from publisher.hub_server.jobs.executor import LaunchFailed
from publisher.hub_server.jobs.spec import VolumeSpec
from publisher.hub_server.storage import Repo, Storage

_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class PinnedVolume:
    spec: VolumeSpec
    commit: str


def pin(storage: Storage, spec: VolumeSpec, can_read: Callable[[Repo], bool]) -> PinnedVolume:
    """The volume with its revision resolved, or a 400 naming the volume and the fix."""
    if spec.type == "bucket":
        raise HubError(400, f"Volume {spec.describe()}: this Hub-compatible server has no storage buckets; "
                            "mount a model, dataset or space repository instead")
    try:
        repo = storage.get(spec.type, spec.source)
    except HubError:
        repo = None
    if repo is None or not can_read(repo):
        raise HubError(400, f"Volume {spec.describe()}: repository not found, or not readable with this token")
    try:
        commit = repo.resolve(spec.revision or "main")
    except HubError:
        raise HubError(400, f"Volume {spec.describe()}: revision {spec.revision or 'main'!r} not found") from None
    return PinnedVolume(spec, commit)


def materialize(storage: Storage, volume: PinnedVolume, dest: Path) -> None:
    """Copy the volume's files into `dest` (world-readable, for any user in a container)."""
    spec = volume.spec
    repo = storage.get(spec.type, spec.source)
    prefix = (spec.path or "").strip("/")
    files = repo.files(volume.commit)
    if prefix and prefix in files:
        raise LaunchFailed(f"Failed to mount volume {spec.describe()}: {prefix} is a file, not a folder")
    chosen = {p[len(prefix) + 1:] if prefix else p: e for p, e in files.items() if not prefix or p.startswith(prefix + "/")}
    if prefix and not chosen:
        raise LaunchFailed(f"Failed to mount volume {spec.describe()}: {prefix} does not exist in "
                           f"{spec.source} at {volume.commit[:12]}")
    dest.mkdir(parents=True, exist_ok=True)
    os.chmod(dest, 0o755)
    for rel, entry in sorted(chosen.items()):
        target = dest / rel
        for parent in reversed(target.relative_to(dest).parents[:-1]):
            folder = dest / parent
            if not folder.exists():
                folder.mkdir()
                os.chmod(folder, 0o755)
        with repo.open(entry) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out, _CHUNK)
        os.chmod(target, 0o644)
