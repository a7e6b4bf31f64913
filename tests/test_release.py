"""`publisher release`: check -> build -> test -> push against the local
Hub-compatible server; a kernel that fails its tests is never pushed."""

from __future__ import annotations


import pytest
from huggingface_hub import HfApi

from smoke_fixtures import publisher_cli

pytestmark = pytest.mark.slow
CPU_ONLY = "torch*-cpu*"


def release(project, repo, hub, *args, op="doubled"):
    env = dict(hub.env(), BROKEN_OP=op)
    return publisher_cli("release", str(project), "--repo", repo, "--local", "--variant", CPU_ONLY,
                         "--endpoint", hub.url, *args, env=env)


def repo_exists(hub, repo: str) -> bool:
    return HfApi(endpoint=hub.url, token=hub.write_token).repo_exists(repo, repo_type="kernel")


def test_release_refuses_to_push_a_failing_kernel(broken_project, hub_env):
    repo = "release-test/broken-refused"
    result = release(broken_project, repo, hub_env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "release stopped before the push" in result.stderr
    assert "failed" in result.stderr and "--allow-untested" in result.stderr
    assert "AssertionError" in result.stdout  # the failing test's output was shown
    assert "== push" not in result.stderr
    assert not repo_exists(hub_env, repo)


def test_release_refuses_a_kernel_that_crashes(broken_project, hub_env):
    repo = "release-test/broken-crash"
    result = release(broken_project, repo, hub_env, op="crash")
    assert result.returncode == 1
    assert "SIGSEGV" in result.stderr
    assert not repo_exists(hub_env, repo)


def test_allow_untested_pushes_loudly(broken_project, hub_env):
    repo = "release-test/broken-forced"
    result = release(broken_project, repo, hub_env, "--allow-untested")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING: --allow-untested" in result.stderr
    assert repo_exists(hub_env, repo)
    files = HfApi(endpoint=hub_env.url).list_repo_files(repo, repo_type="kernel", revision="v1")
    assert any(f.startswith("build/torch") and f.endswith("metadata.json") for f in files)


def test_release_of_a_passing_kernel_publishes_it(noarch_project, hub_env):
    repo = "release-test/halve"
    result = publisher_cli("release", str(noarch_project), "--repo", repo, "--local", "--endpoint", hub_env.url,
                           env=dict(hub_env.env()))
    assert result.returncode == 0, result.stdout + result.stderr
    for step in ("== check", "== build", "== test", "== push"):
        assert step in result.stderr
    files = HfApi(endpoint=hub_env.url).list_repo_files(repo, repo_type="kernel", revision="v1")
    assert "build/torch-cpu/metadata.json" in files
    assert hub_env.write_token not in result.stdout + result.stderr
