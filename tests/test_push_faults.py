"""Faults injected at each step of a push never leave a half release, and a
rerun completes. A push killed in the middle of its commit leaves no version
branch, and the rerun publishes it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from huggingface_hub import HfApi

from publisher.push.changes import variant_files

from cli_helper import run_cli
from push_fixtures import load_kernel, repo_name

# end-to-end: a built and tested project published to the Hub server and loaded back (seconds a test)
pytestmark = pytest.mark.slow

VARIANTS = ("torch-cpu", "torch-cuda")


def _state_of_v1(hub, repo, project) -> str:
    """"absent", "complete" (exactly the local build) or "partial"."""
    api = HfApi(endpoint=hub.url, token=hub.write_token)
    if not api.repo_exists(repo, repo_type="kernel"):
        return "absent"
    if "v1" not in {b.name for b in api.list_repo_refs(repo, repo_type="kernel").branches}:
        return "absent"
    remote = {f.path: f for f in api.list_repo_tree(repo, repo_type="kernel", revision="v1", recursive=True)
              if hasattr(f, "blob_id")}
    local = {f.repo_path: f for v in VARIANTS for f in variant_files(project / "build" / v, v)}
    same = {p for p in remote if p.startswith("build/")} == set(local) and all(
        remote[p].blob_id == f.git_sha1 or (remote[p].lfs and remote[p].lfs.sha256 == f.sha256)
        for p, f in local.items())
    return "complete" if same else "partial"


def _env(hub):
    # No retries in publisher's own layer, so one injected fault is enough to stop a push.
    return {**hub.env(), "PUBLISHER_HUB_RETRIES": "1", "PUBLISHER_HUB_BACKOFF": "0.05"}


@pytest.mark.parametrize("endpoint, action, status, after", [
    ("create-repo", "status", 503, 0),
    ("refs", "status", 502, 0),
    ("tree", "status", 503, 0),
    ("branch", "status", 500, 0),   # creating the staging branch
    ("branch", "status", 500, 1),   # creating v1 at the staged commit
    ("branch-delete", "status", 500, 0),  # removing the staging branch (a leftover is harmless)
    ("preupload", "status", 503, 0),  # retried by huggingface_hub itself
    ("lfs-batch", "status", 500, 0),
    ("lfs-put", "drop", 0, 0),        # connection cut in the middle of the upload
    ("commit", "status", 500, 0),
    ("commit", "drop", 0, 0),
    ("commit", "drop-after", 0, 0),   # the commit lands, the answer is lost
])
def test_fault_never_leaves_a_half_release(hub_env, scale_project, endpoint, action, status, after):
    repo = repo_name()
    rule = hub_env.fault(endpoint, action=action, status=status or 500, after=after)
    first = run_cli("push", repo, str(scale_project), "--allow-untested", env=_env(hub_env))
    assert rule.hits > rule.after, f"the push never reached {endpoint}"
    assert "Traceback" not in first.stderr, first.stderr
    outcome = _state_of_v1(hub_env, repo, scale_project)
    assert outcome in ("absent", "complete")
    assert (first.returncode == 0) == (outcome == "complete"), (first.returncode, outcome, first.stderr)
    hub_env.state.faults.clear()
    rerun = run_cli("push", repo, str(scale_project), "--allow-untested", env=_env(hub_env))
    assert rerun.returncode == 0, rerun.stderr
    assert _state_of_v1(hub_env, repo, scale_project) == "complete"


def test_fault_on_update_keeps_the_previous_release(hub_env, scale_project):
    repo = repo_name()
    assert run_cli("push", repo, str(scale_project), "--allow-untested", env=_env(hub_env)).returncode == 0
    api = HfApi(endpoint=hub_env.url, token=hub_env.write_token)
    before = api.repo_info(repo, repo_type="kernel", revision="v1").sha
    (scale_project / "build" / "torch-cuda" / "extra.py").write_text("X = 1\n")
    from publisher.builder.metadata import read_metadata, write_metadata

    write_metadata(scale_project / "build" / "torch-cuda",
                   {k: v for k, v in read_metadata(scale_project / "build" / "torch-cuda").items() if k != "digest"})
    hub_env.fault("commit", status=503)
    failed = run_cli("push", repo, str(scale_project), "--allow-untested", env=_env(hub_env))
    assert failed.returncode == 3 and f"the Hub at {hub_env.url} failed: " in failed.stderr  # one attempt (_env)
    assert api.repo_info(repo, repo_type="kernel", revision="v1").sha == before
    # With publisher's retries on (the default policy, short backoff) the same fault is ridden out.
    hub_env.fault("commit", status=503)
    ok = run_cli("push", repo, str(scale_project), "--allow-untested", env={**hub_env.env(), "PUBLISHER_HUB_BACKOFF": "0.05"})
    assert ok.returncode == 0, ok.stderr
    assert "retry: commit" in ok.stderr
    assert api.file_exists(repo, "build/torch-cuda/extra.py", repo_type="kernel", revision="v1")


def test_push_killed_mid_commit_then_rerun_completes(hub_env, scale_project):
    repo = repo_name()
    hub_env.fault("commit", action="delay", seconds=3.0)
    proc = subprocess.Popen([sys.executable, "-m", "publisher", "push", repo, str(scale_project), "--allow-untested"],
                            env=hub_env.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    # kill while the server holds the (delayed) commit: it has arrived but not been answered
    while hub_env.state.stats()["arrivals"].get("commit", 0) == 0 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    time.sleep(3.5)  # the server finishes the commit it had received (on the staging branch)
    assert _state_of_v1(hub_env, repo, scale_project) == "absent"
    rerun = run_cli("push", repo, str(scale_project), "--allow-untested", env=hub_env.env())
    assert rerun.returncode == 0, rerun.stderr
    assert _state_of_v1(hub_env, repo, scale_project) == "complete"
    loaded = load_kernel(hub_env.env(), f"""
        import torch, kernels
        print("RESULT", kernels.get_kernel("{repo}", version=1).scale(torch.ones(2), 3.0).tolist())
    """)
    assert "RESULT [3.0, 3.0]" in loaded.stdout, loaded.stderr


def test_a_refused_push_never_waits_for_the_hub(hub_env, scale_project):
    """The repo's branches are asked for while the gate reads the build; a push
    the gate refuses answers at once, whatever the Hub is doing."""
    repo = repo_name()
    hub_env.fault("refs", action="delay", seconds=120.0)
    try:
        # torch-cuda has no test record: refused without --allow-untested
        refused = run_cli("push", repo, str(scale_project), env=_env(hub_env), process=True, timeout=60)
    finally:
        hub_env.state.faults.clear()
    assert refused.returncode == 1, refused.stderr
    assert "push refused" in refused.stderr and "PP104" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and "refs" not in refused.stderr
