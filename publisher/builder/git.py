"""The project's git state: the commit and dirty flag recorded in provenance
(a new one repackages a variant; the ops id is a content hash, inputs.py)."""

from __future__ import annotations

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
    """None when the project is not inside a git work tree with a commit."""
    head = runner.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"])
    commit = head.output.strip()
    if not head.ok or len(commit) != 40:
        return None
    status = runner.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "."])
    return GitState(commit, bool(status.output.strip()) or not status.ok)
