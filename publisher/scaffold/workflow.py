"""The release workflow of a kernel repository: a caller of publisher's reusable
workflow (publisher/resources/workflow.yaml says where it lives), pinned to the tag
of this publisher release, written where GitHub reads workflows: the
.github/workflows folder at the top of the git work tree holding the project."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from publisher import __version__, git
from publisher.data import read_yaml
from publisher.errors import UsageError

# GitHub: an owner of letters, digits and dashes; a repository name of letters, digits, `.`, `_`, `-`
_REPOSITORY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
_REF = re.compile(r"[A-Za-z0-9._/-]+")
_PLAIN = re.compile(r"[A-Za-z0-9_./-]+")


@dataclass(frozen=True)
class WorkflowRef:
    repository: str  # OWNER/REPO on GitHub
    ref: str  # a tag, branch or commit of it
    path: str  # the reusable workflow in that repository

    @property
    def uses(self) -> str:
        return f"{self.repository}/{self.path}@{self.ref}"


def default_ref() -> WorkflowRef:
    """publisher's reusable workflow at this release's tag."""
    where = read_yaml("workflow.yaml")
    return WorkflowRef(where["repository"], f"v{__version__}", where["path"])


def parse_ref(text: str) -> WorkflowRef:
    """--workflow-ref OWNER/REPO@REF: the reusable workflow of another repository or ref (a fork, a branch)."""
    repository, at, ref = text.partition("@")
    if not at or not _REPOSITORY.fullmatch(repository) or not _REF.fullmatch(ref) or ref.startswith(("-", "/")):
        raise UsageError(f"--workflow-ref `{text}` is not OWNER/REPO@REF",
                         f"name a GitHub repository and a tag, branch or commit of it, e.g. {default_ref().repository}@main")
    return WorkflowRef(repository, ref, read_yaml("workflow.yaml")["path"])


@dataclass(frozen=True)
class Placement:
    file: Path  # the workflow file
    project: str  # the project folder, relative to the top of the repository ("." at the top)

    @property
    def at_top(self) -> bool:
        return self.project == "."


def own_placement(project_root: Path) -> Placement:
    """The workflow of a project that is a repository of its own."""
    return Placement(Path(project_root).resolve() / ".github" / "workflows" / "release.yml", ".")


def enclosing_repository(path: Path) -> Path | None:
    """The top of the git work tree holding `path` (which need not exist yet); None outside one."""
    path = Path(path).resolve()
    return git.toplevel(next(p for p in (path, *path.parents) if p.is_dir()))


def place(project_root: Path, kernel: str) -> Placement:
    """Where the workflow of the existing project at `project_root` goes. A project inside a
    larger git repository gets release-<kernel>.yml at the top of that repository."""
    root = Path(project_root).resolve()
    top = enclosing_repository(root)
    if top is None or top == root or not root.is_relative_to(top):
        return own_placement(root)
    return Placement(top / ".github" / "workflows" / f"release-{kernel}.yml", root.relative_to(top).as_posix())


def workflow_values(repo_id: str, kernel: str, placement: Placement, ref: WorkflowRef) -> dict[str, str]:
    """The values release.yml.j2 is rendered with."""
    tags = "v*" if placement.at_top else f"{kernel}-v*"
    return {
        "repo_id": repo_id,
        "uses": ref.uses,
        # quoted only where YAML would read the path as something else
        "project": placement.project if _PLAIN.fullmatch(placement.project) else json.dumps(placement.project),
        "tag_pattern": tags,
        "trigger_text": f" when a tag {tags} is pushed, or when run by hand",
        "name_suffix": "" if placement.at_top else f"-{kernel}",
        "publisher_version": __version__,
    }
