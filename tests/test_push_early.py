"""A release after the first sends its files while the push still waits for the
Hub's answers (the repo's branches, main's files) and starts its staging branch
while the plan is made. What a user checks: each new file reaches the Hub
once, the new version is complete, no staging branch is left behind whatever
happens, and a push refused by its own checks sends no file at all."""

from __future__ import annotations

import os

import pytest
from huggingface_hub import HfApi

from publisher.builder.metadata import read_metadata, write_metadata
from publisher.push.changes import variant_files

from cli_helper import run_cli
from push_fixtures import repo_name

# end-to-end: real pushes to the Hub server (seconds a test)
pytestmark = pytest.mark.slow

VARIANTS = ("torch-cpu", "torch-cuda")


def _api(hub) -> HfApi:
    return HfApi(endpoint=hub.url, token=hub.write_token)


def _next_release(project) -> None:
    """Each variant's binary holds new bytes (its own), recorded in its digest as a rebuild would."""
    for variant in VARIANTS:
        folder = project / "build" / variant
        (folder / "table.bin").write_bytes(os.urandom(4096))
        write_metadata(folder, {k: v for k, v in read_metadata(folder).items() if k != "digest"})


def _branches(hub, repo) -> set[str]:
    return {b.name for b in _api(hub).list_repo_refs(repo, repo_type="kernel").branches}


def _holds_build(hub, repo, project, branch) -> bool:
    remote = {f.path: f for f in _api(hub).list_repo_tree(repo, repo_type="kernel", revision=branch, recursive=True)
              if hasattr(f, "blob_id")}
    local = [f for v in VARIANTS for f in variant_files(project / "build" / v, v)]
    return all(f.repo_path in remote and (remote[f.repo_path].lfs.sha256 == f.sha256 if remote[f.repo_path].lfs
                                          else remote[f.repo_path].blob_id == f.git_sha1) for f in local)


def _push(hub, repo, project, *args, env=None):
    return run_cli("push", repo, str(project), "--allow-untested", "--no-card", *args, env=env or hub.env())


def test_next_release_sends_each_new_file_once(hub_env, scale_project):
    repo = repo_name()
    assert _push(hub_env, repo, scale_project).returncode == 0
    _next_release(scale_project)
    hub_env.state.reset_stats()
    pushed = _push(hub_env, repo, scale_project, "--branch", "v2")
    assert pushed.returncode == 0, pushed.stderr
    calls = hub_env.state.stats()["requests"]
    # two new LFS objects (one table.bin per variant), each sent once; the Hub asked once which files are LFS
    assert calls.get("lfs-put") == 2 and calls.get("preupload") == 1, calls
    assert _holds_build(hub_env, repo, scale_project, "v2")
    assert not [b for b in _branches(hub_env, repo) if b.startswith("publisher-staging")]


def test_a_push_stopped_after_its_staging_branch_began_leaves_none(hub_env, scale_project):
    repo = repo_name()
    assert _push(hub_env, repo, scale_project).returncode == 0
    _next_release(scale_project)
    # the plan's read of main's files fails (an answer no client retries): the staging branch was
    # already being made beside it
    rule = hub_env.fault("tree", status=400)
    failed = _push(hub_env, repo, scale_project, "--branch", "v2")
    assert rule.hits == 1 and failed.returncode != 0 and "list files of" in failed.stderr, failed.stderr
    assert "Traceback" not in failed.stderr
    assert _branches(hub_env, repo) == {"main", "v1"}
    hub_env.state.faults.clear()
    rerun = _push(hub_env, repo, scale_project, "--branch", "v2")
    assert rerun.returncode == 0, rerun.stderr
    assert _holds_build(hub_env, repo, scale_project, "v2") and _branches(hub_env, repo) == {"main", "v1", "v2"}


def test_a_push_its_coverage_check_refuses_sends_no_file(hub_env, scale_project):
    repo = repo_name()
    assert _push(hub_env, repo, scale_project).returncode == 0
    _next_release(scale_project)
    hub_env.state.reset_stats()
    refused = _push(hub_env, repo, scale_project, "--branch", "v2", "--variant", "torch-cpu")
    assert refused.returncode == 1 and "PP201" in refused.stderr, refused.stderr
    arrived = hub_env.state.stats()["arrivals"]
    assert not {"preupload", "lfs-batch", "lfs-put", "commit", "branch"} & set(arrived), arrived
    assert _branches(hub_env, repo) == {"main", "v1"}


@pytest.mark.parametrize("endpoint, action, status", [
    ("preupload", "status", 400),  # the Hub's LFS query refused: no client retries a 400
    ("lfs-batch", "status", 400),
    ("lfs-put", "drop", 0),        # the connection cut in the middle of an object
])
def test_a_failed_early_send_is_sent_again(hub_env, scale_project, endpoint, action, status):
    """The first request of its kind is the early send's; the push sends the files again and completes."""
    repo = repo_name()
    assert _push(hub_env, repo, scale_project).returncode == 0
    _next_release(scale_project)
    rule = hub_env.fault(endpoint, action=action, status=status or 500)
    pushed = _push(hub_env, repo, scale_project, "--branch", "v2", env={**hub_env.env(), "PUBLISHER_HUB_BACKOFF": "0.05"})
    assert rule.hits >= 1 and pushed.returncode == 0, pushed.stderr
    assert "Traceback" not in pushed.stderr
    assert _holds_build(hub_env, repo, scale_project, "v2")
    assert not [b for b in _branches(hub_env, repo) if b.startswith("publisher-staging")]


def test_an_unchanged_re_push_sends_nothing_while_the_hub_is_slow_to_answer(hub_env, scale_project):
    """This folder recorded what it published: with the branches not yet listed when the gate has
    passed the build, the push does not guess that it is new, and sends no byte."""
    repo = repo_name()
    assert _push(hub_env, repo, scale_project).returncode == 0
    hub_env.state.reset_stats()
    hub_env.fault("refs", action="delay", seconds=1.0)
    again = _push(hub_env, repo, scale_project)
    assert again.returncode == 0 and "nothing changed: no commit" in again.stdout, again.stdout + again.stderr
    stats = hub_env.state.stats()
    assert stats["bytes_in_total"] == 0 and not {"preupload", "lfs-batch", "lfs-put", "commit"} & set(stats["arrivals"]), stats


@pytest.mark.parametrize("endpoint, status, after", [
    ("branch", 500, 0),         # the staging branch, made beside the plan's read
    ("commit", 500, 0),
    ("tree", 400, 1),           # the verifying listing (huggingface_hub would retry a 5xx read for ~20 s)
    ("branch", 500, 1),         # v2 at the verified commit
])
def test_a_fault_in_the_next_release_leaves_v2_complete_or_absent(hub_env, scale_project, endpoint, status, after):
    repo = repo_name()
    assert _push(hub_env, repo, scale_project).returncode == 0
    _next_release(scale_project)
    rule = hub_env.fault(endpoint, status=status, after=after, times=20)  # past every retry of every client
    env = {**hub_env.env(), "PUBLISHER_HUB_RETRIES": "1"}
    failed = _push(hub_env, repo, scale_project, "--branch", "v2", env=env)
    hub_env.state.faults.clear()
    assert rule.hits > after and failed.returncode != 0, failed.stdout + failed.stderr
    assert "Traceback" not in failed.stderr
    left = _branches(hub_env, repo)
    assert "v2" not in left and not [b for b in left if b.startswith("publisher-staging")], left
    rerun = _push(hub_env, repo, scale_project, "--branch", "v2")
    assert rerun.returncode == 0, rerun.stderr
    assert _holds_build(hub_env, repo, scale_project, "v2")
