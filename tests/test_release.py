"""`publisher release`: check -> build -> test -> push against the local
Hub-compatible server; a kernel that fails its tests is never pushed."""

from __future__ import annotations

import pytest
from huggingface_hub import HfApi

from publisher.plan.matrix import load_matrix

from cli_helper import run_cli
from hub_fixtures import TRUSTED_ORG
from matrix_fixtures import local_cpu_variant_name
from smoke_fixtures import write_noarch

pytestmark = pytest.mark.slow
CPU_ONLY = "torch*-cpu*"


def release(project, repo, hub, *args, op="doubled", partial=True):
    """The local CPU variant only: no required cell, hence --partial."""
    env = dict(hub.env(), BROKEN_OP=op)
    return run_cli("release", str(project), "--repo", repo, "--local", "--variant", CPU_ONLY,
                         "--endpoint", hub.url, *(["--partial"] if partial else []), *args, env=env)


def repo_exists(hub, repo: str) -> bool:
    return HfApi(endpoint=hub.url, token=hub.write_token).repo_exists(repo, repo_type="kernel")


def test_release_lacking_required_variants_stops_before_the_build(broken_project, hub_env):
    repo = "release-test/broken-partial"
    result = release(broken_project, repo, hub_env, partial=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "release stopped before the build: PP201" in result.stderr
    # every required CPU variant of the default matrix but the one this release builds (the running torch's)
    required_cpu = [name for c in load_matrix().cells if c.required and c.compute == "cpu" and c.platform == "x86_64-linux"
                    if (name := f"torch{c.torch.replace('.', '')}-cxx11-cpu-x86_64-linux") != local_cpu_variant_name()]
    assert required_cpu and all(name in result.stderr for name in required_cpu)
    assert "x86_64-linux: " in result.stderr
    assert "--partial" in result.stderr and "== build" not in result.stderr
    assert not repo_exists(hub_env, repo)


def test_release_refuses_to_push_a_failing_kernel(broken_project, hub_env):
    repo = "release-test/broken-refused"
    result = release(broken_project, repo, hub_env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "release stopped before the push" in result.stderr
    assert "failed their tests" in result.stderr
    assert "AssertionError" in result.stdout  # the failing test's output was shown
    assert "== push" not in result.stderr
    assert not repo_exists(hub_env, repo)


def test_release_refuses_a_kernel_that_crashes(broken_project, hub_env):
    repo = "release-test/broken-crash"
    result = release(broken_project, repo, hub_env, op="crash")
    assert result.returncode == 1
    assert "SIGSEGV" in result.stderr
    assert not repo_exists(hub_env, repo)


def test_allow_untested_never_releases_a_failing_kernel(broken_project, hub_env):
    repo = "release-test/broken-forced"
    result = release(broken_project, repo, hub_env, "--allow-untested")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "failed their tests" in result.stderr and "--allow-untested does not override this" in result.stderr
    assert not repo_exists(hub_env, repo)


def test_release_of_a_passing_kernel_publishes_it(noarch_project, hub_env):
    repo = "release-test/halve"
    result = run_cli("release", str(noarch_project), "--repo", repo, "--local", "--endpoint", hub_env.url,
                           env=dict(hub_env.env()))
    assert result.returncode == 0, result.stdout + result.stderr
    for step in ("== check", "== build", "== test", "== push"):
        assert step in result.stderr
    files = HfApi(endpoint=hub_env.url).list_repo_files(repo, repo_type="kernel", revision="v1")
    assert "build/torch-cpu/metadata.json" in files
    assert hub_env.write_token not in result.stdout + result.stderr


def test_release_rerun_fetches_from_the_hub_and_commits_nothing(hub_env, tmp_path):
    """A CI rerun of a release (a fresh checkout, same sources): the variants
    come from the Hub (same inputs fingerprint), the push finds nothing to change."""
    repo = f"{TRUSTED_ORG}/release-rerun"  # the hub cache fetches from a publisher the Hub trusts (or the user's own)
    api = HfApi(endpoint=hub_env.url, token=hub_env.write_token)
    runs = []
    for checkout in ("first", "rerun"):
        project = write_noarch(tmp_path / checkout / "halve")
        result = run_cli("release", str(project), "--repo", repo, "--local", "--endpoint", hub_env.url,
                               env=dict(hub_env.env()))
        assert result.returncode == 0, result.stdout + result.stderr
        runs.append(result)
        if checkout == "first":
            commits = len(api.list_repo_commits(repo, repo_type="kernel", revision="v1"))
    first, rerun = runs
    assert "fetched" not in first.stdout and "committed" in first.stdout
    assert f"from hub cache {repo}@" in rerun.stdout and "built" not in rerun.stdout.split("logs:")[0]
    assert "nothing changed: no commit" in rerun.stdout
    assert len(api.list_repo_commits(repo, repo_type="kernel", revision="v1")) == commits
