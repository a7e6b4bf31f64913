"""`publisher skills add`: copy the agent skill publisher ships
(resources/skills/<name>/) to where a coding agent reads skills: Claude Code,
Codex or opencode, in this project or for the user (--global). The folders
each agent reads are data (resources/skills/targets.yaml). A skill already
there is replaced only with --force."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from publisher.data import data_path, read_yaml
from publisher.errors import PublisherError, UsageError

SKILLS_DIR = data_path("skills")


@dataclass(frozen=True)
class SkillsOptions:
    agents: tuple[str, ...]  # claude, codex, opencode
    global_: bool = False  # the user's folders instead of this project's
    dest: Path | None = None  # a folder of skills given by hand
    force: bool = False
    cwd: Path = Path(".")


@dataclass(frozen=True)
class Installed:
    skill: str
    path: Path
    state: str  # installed, replaced, unchanged (the same files were there)


def agents() -> tuple[str, ...]:
    return tuple(read_yaml("skills/targets.yaml")["agents"])


def skill_names() -> tuple[str, ...]:
    return tuple(read_yaml("skills/targets.yaml")["skills"])


def targets(options: SkillsOptions) -> list[Path]:
    table = read_yaml("skills/targets.yaml")["agents"]
    out: list[Path] = []
    for agent in options.agents:
        if agent not in table:
            raise UsageError(f"unknown agent {agent!r}", f"one of: {', '.join(table)}")
        folder = table[agent]["global" if options.global_ else "project"]
        path = Path(folder).expanduser() if folder.startswith("~") else options.cwd / folder
        if path not in out:
            out.append(path)
    if options.dest is not None:
        out.append(options.dest)
    if not out:
        raise UsageError("no destination", "pick one or more of --claude, --codex, --opencode, or --dest DIR")
    return out


def add(options: SkillsOptions) -> list[Installed]:
    """Install every bundled skill into every target; refuses (before writing anything) a skill that
    is already there and differs, unless --force."""
    plans = [(name, folder / name) for folder in targets(options) for name in skill_names()]
    clashes = [dest for name, dest in plans if dest.exists() and not _same(SKILLS_DIR / name, dest)]
    if clashes and not options.force:
        raise PublisherError(f"a different skill is already installed at {', '.join(map(str, clashes))}",
                             "rerun with --force to replace it")
    installed = []
    for name, dest in plans:
        replaced = dest.exists() or dest.is_symlink()
        if replaced and _same(SKILLS_DIR / name, dest):
            installed.append(Installed(name, dest, "unchanged"))
            continue
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        elif dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(SKILLS_DIR / name, dest)
        installed.append(Installed(name, dest, "replaced" if replaced else "installed"))
    return installed


def _same(source: Path, dest: Path) -> bool:
    if not dest.is_dir() or dest.is_symlink():
        return False
    ours = {p.relative_to(source): p.read_bytes() for p in source.rglob("*") if p.is_file()}
    try:
        theirs = {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    except OSError:
        return False
    return ours == theirs
