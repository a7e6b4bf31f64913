"""`publisher skills add`: install the agent skill publisher ships (the
publisher loop: adopt, check findings and their fixes, build, test, push) for
Claude Code, Codex or opencode. The work is in publisher/skills.py."""

from __future__ import annotations

from pathlib import Path

import click

from publisher import skills
from publisher.cli.common import echo_json, json_flag
from publisher.errors import EXIT_OK


@click.group("skills")
def command() -> None:
    """Agent skills that teach a coding agent to publish kernels with publisher."""


@command.command("add")
@click.option("--claude", is_flag=True, help="Claude Code (.claude/skills; with --global ~/.claude/skills).")
@click.option("--codex", is_flag=True, help="Codex (.agents/skills; with --global ~/.agents/skills).")
@click.option("--opencode", is_flag=True, help="opencode (.opencode/skills; with --global ~/.config/opencode/skills).")
@click.option("--global", "global_", is_flag=True, help="Install for the user instead of this project.")
@click.option("--dest", type=click.Path(path_type=Path, file_okay=False), help="Install into this skills folder too.")
@click.option("--force", is_flag=True, help="Replace a different skill of the same name.")
@json_flag
def add(claude: bool, codex: bool, opencode: bool, global_: bool, dest: Path | None, force: bool, as_json: bool) -> int:
    """Install the kernel-publisher skill where the chosen agents read skills."""
    chosen = tuple(a for a, on in (("claude", claude), ("codex", codex), ("opencode", opencode)) if on)
    installed = skills.add(skills.SkillsOptions(agents=chosen, global_=global_, dest=dest, force=force))
    if as_json:
        echo_json({"ok": True, "installed": [{"skill": i.skill, "path": str(i.path), "state": i.state}
                                              for i in installed]})
    else:
        for item in installed:
            click.echo(f"{item.state} {item.skill}: {item.path}")
    return EXIT_OK
