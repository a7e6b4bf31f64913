"""`publisher init` as one call: plan the files (a new project, or only the
release workflow of an existing one), refuse before writing anything when the
folder is not empty or a file would be overwritten (unless `force`), then write."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from publisher import git
from publisher.errors import ProjectError, UsageError
from publisher.findings import render_human
from publisher.hub_names import repo_id_problem
from publisher.options import InitOptions
from publisher.project.layout import file_kind, unusable
from publisher.project.load import read_toml
from publisher.scaffold import templates, workflow
from publisher.scaffold.names import kernel_name


@dataclass(frozen=True)
class InitResult:
    options: InitOptions
    root: Path  # the project folder
    repo_id: str
    written: tuple[Path, ...]  # every file written, the workflow last
    overwritten: tuple[Path, ...]  # those that existed before (--force)
    tag_pattern: str  # the tags that start a release
    outer_repository: Path | None = None  # the git repository a new project was made inside of
    git_initialized: bool = False  # the new project's folder was made a git repository

    @property
    def workflow(self) -> Path:
        return self.written[-1]


def run_init(options: InitOptions) -> InitResult:
    root = Path(options.path)
    problem = unusable(str(root))
    if problem:
        raise UsageError(f"the path given {problem}", "pass the folder of the kernel project")
    outer = None
    if options.ci_only:
        repo_id, kernel = _existing_project(root)
        files: dict[Path, str] = {}
        placement = workflow.place(root, kernel)
    else:
        names = options.names
        repo_id, kernel = names.repo_id, names.name
        _check_new_folder(root, options.force)
        files = {root / rel: text for rel, text in templates.project_files(names, options.backends, options.license).items()}
        # a new project's workflow stays in its folder (inside another repository, the command says how to move it)
        placement = workflow.own_placement(root)
        outer = workflow.enclosing_repository(root)
    values = workflow.workflow_values(repo_id, kernel, placement, options.workflow or workflow.default_ref())
    files[placement.file] = templates.render("release.yml.j2", values)
    overwritten = _existing(files, options.force, options.ci_only)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    initialized = not options.ci_only and outer is None and git.init(root)
    return InitResult(options, root, repo_id, tuple(files), tuple(overwritten), values["tag_pattern"],
                      outer_repository=None if outer == root.resolve() else outer, git_initialized=initialized)


def _check_new_folder(root: Path, force: bool) -> None:
    if not os.path.lexists(root):
        return
    kind = file_kind(root)
    if kind != "a folder":
        raise UsageError(f"{root} exists and is {kind or 'a file'}", "pass a new or empty folder for the project")
    entries = sorted(p.name for p in root.iterdir())
    if entries and not force:
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        hint = "choose a new folder, or pass --force to write the scaffold's files into it (files it does not make are kept)"
        if "build.toml" in entries:
            hint = f"{root} already holds a kernel project; to add only the release workflow: publisher init --ci {root}"
        raise UsageError(f"{root} is not empty ({len(entries)} entries: {shown}); publisher init starts a new project", hint)


def _existing(files: Mapping[Path, str], force: bool, ci_only: bool) -> list[Path]:
    """The planned files that exist; UsageError without `force`, or for what no file can replace."""
    present = [p for p in files if os.path.lexists(p)]
    for path in present:
        kind = file_kind(path)
        if kind is not None:
            raise UsageError(f"{path} exists and is {kind}", "move it away; publisher init writes a file there")
    if present and not force:
        what = "the release workflow" if ci_only else "files of the new project"
        raise UsageError(f"{what} would overwrite: " + ", ".join(map(str, present)),
                         "pass --force to overwrite them, or move them away first")
    return present


def _existing_project(root: Path) -> tuple[str, str]:
    """(repo id, kernel name) of the project in `root`, for --ci."""
    build_toml = root / "build.toml"
    if not root.is_dir() or not build_toml.is_file():
        raise UsageError(f"{root}: no build.toml in this folder",
                         "--ci adds the release workflow to an existing kernel project; to start a new one: "
                         "publisher init OWNER/NAME")
    _text, data, findings = read_toml(build_toml)
    if data is None:
        raise ProjectError(f"{build_toml} cannot be read:\n{render_human(findings)}", f"run `publisher check {root}`")
    general = data.get("general") if isinstance(data.get("general"), Mapping) else {}
    hub = general.get("hub") if isinstance(general.get("hub"), Mapping) else {}
    repo_id = hub.get("repo-id")
    if repo_id is None:
        raise ProjectError(f"{build_toml}: no [general.hub] repo-id, the Hub repository the workflow publishes to",
                           'add it to build.toml:\n\n    [general.hub]\n    repo-id = "my-org/my-kernel"\n')
    problem = repo_id_problem(repo_id)
    if problem:
        raise ProjectError(f"{build_toml}: general.hub.repo-id `{repo_id}` is not a Hub repository id ({problem})",
                           'write it as OWNER/NAME, e.g. repo-id = "my-org/my-kernel"')
    name = general.get("name")
    return repo_id, kernel_name(name if isinstance(name, str) else "") or kernel_name(repo_id.split("/", 1)[1]) or "kernel"

