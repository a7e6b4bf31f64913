"""`publisher skills add`: the bundled skill lands where each agent reads
skills, replaces a different one only with --force, and says only what
publisher does (every command and finding code it names exists)."""

from __future__ import annotations

import json
import re

import yaml

from publisher.cli import COMMANDS
from publisher.codes import CODES
from publisher.skills import SKILLS_DIR

from cli_helper import run_cli

SKILL = SKILLS_DIR / "kernel-publisher" / "SKILL.md"


def test_each_agent_gets_the_skill_in_its_project_folder(tmp_path):
    done = run_cli("skills", "add", "--claude", "--codex", "--opencode", cwd=tmp_path)
    assert done.returncode == 0, done.output
    for folder in (".claude/skills", ".agents/skills", ".opencode/skills"):
        assert (tmp_path / folder / "kernel-publisher" / "SKILL.md").read_bytes() == SKILL.read_bytes()
    again = run_cli("skills", "add", "--claude", cwd=tmp_path)
    assert again.returncode == 0 and "unchanged kernel-publisher" in again.stdout


def test_global_installs_under_the_home_folder(tmp_path):
    home = tmp_path / "home"
    done = run_cli("skills", "add", "--global", "--claude", "--codex", "--opencode", "--json", cwd=tmp_path,
                   env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.output
    paths = {item["path"] for item in json.loads(done.stdout)["installed"]}
    assert paths == {str(home / p / "kernel-publisher") for p in (".claude/skills", ".agents/skills",
                                                                  ".config/opencode/skills")}
    assert not (tmp_path / ".claude").exists()


def test_a_different_skill_of_the_same_name_is_replaced_only_with_force(tmp_path):
    target = tmp_path / ".claude/skills/kernel-publisher"
    target.mkdir(parents=True)
    (target / "SKILL.md").write_text("my own notes\n")
    refused = run_cli("skills", "add", "--claude", cwd=tmp_path)
    assert refused.returncode == 1 and "--force" in refused.stderr
    assert (target / "SKILL.md").read_text() == "my own notes\n"
    forced = run_cli("skills", "add", "--claude", "--force", cwd=tmp_path)
    assert forced.returncode == 0 and (target / "SKILL.md").read_bytes() == SKILL.read_bytes()


def test_no_destination_is_a_usage_error(tmp_path):
    done = run_cli("skills", "add", cwd=tmp_path)
    assert done.returncode == 2 and "--claude" in done.stderr


def test_the_skill_has_the_frontmatter_agents_read_and_names_only_real_commands_and_codes():
    text = SKILL.read_text()
    front = yaml.safe_load(text.split("---")[1])
    assert front["name"] == "kernel-publisher" and re.fullmatch(r"[a-z0-9-]{1,64}", front["name"])
    assert 0 < len(front["description"]) <= 1024
    commands = set(re.findall(r"`?publisher (\w[\w-]*)", text))
    assert commands and commands <= set(COMMANDS), commands - set(COMMANDS)
    codes = set(re.findall(r"\bP[ABP]\d{3}\b", text))
    assert codes and codes <= set(CODES), codes - set(CODES)
