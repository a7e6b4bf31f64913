"""Git, in one place: the project's state (the commit and dirty flag recorded
in provenance; a new one repackages a variant), the work tree that holds a
path (Docker mounts it, Nix sees only its tracked files), and git's blob id
(the Hub's id of a regular file, computed by the push client and our Hub server)."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from publisher import runner


@dataclass(frozen=True)
class GitState:
    commit: str  # 40 hex digits
    dirty: bool  # tracked files under the project differ from the commit

    @property
    def revision(self) -> str:
        return self.commit[:7] + ("_dirty" if self.dirty else "")


def git_state(root: Path) -> GitState | None:
    """None when the project is not inside a git work tree with a commit, or git is not installed
    (a container image without it builds as well)."""
    if shutil.which("git") is None:
        return None
    head = runner.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"])
    commit = head.output.strip()
    if not head.ok or len(commit) != 40:
        return None
    status = runner.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "."])
    return GitState(commit, bool(status.output.strip()) or not status.ok)


def toplevel(path: Path) -> Path | None:
    """The git work tree holding `path`; None outside one or without git."""
    if shutil.which("git") is None:
        return None
    probe = runner.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"])
    return Path(probe.output.strip().splitlines()[-1]).resolve() if probe.ok else None


def init(path: Path) -> bool:
    """Make `path` a git repository (no commit); False without git or when git fails."""
    return shutil.which("git") is not None and runner.run(["git", "init", "-q", str(path)]).ok


def tracks(top: Path, path: Path) -> bool:
    if shutil.which("git") is None:
        return False
    return runner.run(["git", "-C", str(top), "ls-files", "--error-unmatch", str(path.relative_to(top))]).ok


def git_object(kind: str, body: bytes) -> tuple[str, bytes]:
    """A git object's id and the bytes git stores for it (before compression)."""
    raw = f"{kind} {len(body)}\0".encode() + body
    return hashlib.sha1(raw).hexdigest(), raw


def blob_id(data: bytes) -> str:
    return git_object("blob", data)[0]
