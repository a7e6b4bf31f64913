"""`publisher push` against the Hub-compatible server, with the real
huggingface_hub (in the push process) and the real kernels client (in another
process)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from publisher import state
from publisher.plan.matrix import load_matrix
from publisher.push.changes import variant_files

from cli_helper import run_cli
from push_fixtures import build, load_kernel, repo_name, write_scale

# end-to-end: a built and tested project published to the Hub server and loaded back (seconds a test)
pytestmark = pytest.mark.slow

LOAD_V1 = """
    import torch, kernels
    k = kernels.get_kernel("{repo}", version=1)
    print("RESULT", k.scale(torch.arange(3.0), 2.0).tolist())
"""


def _api(hub) -> HfApi:
    return HfApi(endpoint=hub.url, token=hub.write_token)


def _push(hub, project, repo, *args, env=None):
    return run_cli("push", repo, str(project), *args, env=env or hub.env())


def _branch_files(hub, repo, rev):
    return {f.path: f for f in _api(hub).list_repo_tree(repo, repo_type="kernel", revision=rev, recursive=True)
            if hasattr(f, "blob_id")}


def test_push_then_get_kernel_loads(hub_env, scale_project):
    repo = repo_name()
    result = _push(hub_env, scale_project, repo, "--allow-untested")
    assert result.returncode == 0, result.stderr
    assert "committed" in result.stdout and "verified: 9 file(s) on v1" in result.stdout
    # torch-cuda has no test record (no GPU here): published only because of --allow-untested, loudly.
    assert "torch-cuda: no test record" in result.stderr and "torch-cpu: no test record" not in result.stderr
    newest_cpu = max((c.torch for c in load_matrix().cells if c.compute == "cpu"), key=lambda v: tuple(map(int, v.split("."))))
    assert f"torch {newest_cpu} cpu x86_64-linux" in result.stdout and "-> torch-cpu" in result.stdout
    files = _branch_files(hub_env, repo, "v1")
    assert files["build/torch-cpu/table.bin"].lfs is not None  # binary went through LFS
    assert {p for p in files if p.startswith("build/")} == {
        f.repo_path for v in ("torch-cpu", "torch-cuda") for f in variant_files(scale_project / "build" / v, v)}
    assert not [b for b in _api(hub_env).list_repo_refs(repo, repo_type="kernel").branches
                if b.name.startswith("publisher-staging")]

    loaded = load_kernel(hub_env.env(), LOAD_V1.format(repo=repo))
    assert "RESULT [0.0, 2.0, 4.0]" in loaded.stdout, loaded.stderr

    readme = open(_api(hub_env).hf_hub_download(repo, "README.md", repo_type="kernel"), encoding="utf-8").read()
    assert readme.startswith("---\nlibrary_name: kernels\nlicense: apache-2.0\n")
    assert f'get_kernel("{repo}", version=1)' in readme and "- `scale`" in readme
    assert (f"| `torch-cpu` | cpu | - | any CPU | passed (1 passed) on CPU (torch {importlib.metadata.version('torch')}"
            in readme)
    # Python-only: no archs, so kernels loads it on every GPU
    assert "| `torch-cuda` | cuda | - | T4, A100, A10G/A40/RTX 30xx, L4/L40S/RTX 40xx, H100/H200, B200, RTX 50xx | " \
           "not tested |" in readme
    # loaded back as a consumer, exactly as the card says (the org is trusted: the bare call)
    assert f'consumer load: get_kernel("{repo}", version=1) as a consumer (fresh cache, no token): loaded torch-cpu' \
        in result.stdout


def test_unchanged_repush_makes_no_commit_and_sends_no_bytes(hub_env, scale_project):
    repo = repo_name()
    assert _push(hub_env, scale_project, repo, "--allow-untested").returncode == 0
    commits = len(_api(hub_env).list_repo_commits(repo, repo_type="kernel", revision="v1"))
    hub_env.state.reset_stats()
    again = _push(hub_env, scale_project, repo, "--allow-untested", "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["commit"] is None and report["plan"]["noop"] and report["verified"]
    assert report["card_commit"] is None
    stats = hub_env.state.stats()
    assert stats["bytes_in_total"] == 0, stats
    assert not {"commit", "preupload", "lfs-batch", "lfs-put", "create-repo"} & set(stats["requests"])
    # the branches listed while the gate ran are the ones the plan used; the other listing is the consumer
    # load's (kernels finds branch v1), which runs on a no-op push too: an unloadable release never passes silently
    assert stats["requests"]["refs"] == 2
    assert report["consumer"]["status"] == "loaded"
    assert len(_api(hub_env).list_repo_commits(repo, repo_type="kernel", revision="v1")) == commits


def test_one_changed_variant_uploads_only_its_changed_files(hub_env, scale_project):
    repo = repo_name()
    assert _push(hub_env, scale_project, repo, "--allow-untested").returncode == 0
    write_scale(scale_project, extra=" * 1")
    build(scale_project, hub_env.env(), "--variant", "torch-cuda")
    hub_env.state.reset_stats()
    dry = _push(hub_env, scale_project, repo, "--allow-untested", "--dry-run", "--json")
    plan = json.loads(dry.stdout)["plan"]["groups"]
    assert plan["torch-cpu"] == {"added": [], "deleted": [], "unchanged": 4, "bytes": 0}
    assert sorted(plan["torch-cuda"]["added"]) == ["build/torch-cuda/__init__.py", "build/torch-cuda/_ops.py",
                                                   "build/torch-cuda/metadata.json"]
    assert hub_env.state.stats()["bytes_in_total"] == 0  # the dry run sent nothing
    pushed = _push(hub_env, scale_project, repo, "--allow-untested")
    assert pushed.returncode == 0, pushed.stderr
    sent = hub_env.state.stats()["bytes_in"]
    assert "lfs-put" not in sent  # table.bin did not change: not sent again
    assert sent["commit"] < 4000  # three small files, base64-encoded in the NDJSON commit


def test_version_2_leaves_v1_loadable_and_unchanged(hub_env, scale_project, tmp_path):
    repo = repo_name()
    assert _push(hub_env, scale_project, repo, "--allow-untested").returncode == 0
    v1_head = _api(hub_env).repo_info(repo, repo_type="kernel", revision="v1").sha
    write_scale(scale_project, version=2, extra=" + 100")
    build(scale_project, hub_env.env())
    pushed = _push(hub_env, scale_project, repo, "--allow-untested")
    assert pushed.returncode == 0, pushed.stderr
    assert "branch v2 (new" in pushed.stdout
    assert _api(hub_env).repo_info(repo, repo_type="kernel", revision="v1").sha == v1_head
    loaded = load_kernel(hub_env.env(), f"""
        import torch, kernels
        for v in (1, 2):
            k = kernels.get_kernel("{repo}", version=v)
            print("RESULT", v, k.scale(torch.ones(1), 2.0).tolist())
    """)
    assert "RESULT 1 [2.0]" in loaded.stdout and "RESULT 2 [102.0]" in loaded.stdout, loaded.stderr


def test_stale_files_go_and_other_variants_stay(hub_env, scale_project):
    repo = repo_name()
    assert _push(hub_env, scale_project, repo, "--allow-untested").returncode == 0
    _api(hub_env).create_commit(repo, [CommitOperationAdd("build/torch-cpu/stale.py", b"old\n"),
                                       CommitOperationAdd("build/torch-xpu/__init__.py", b"other\n")],
                                commit_message="someone else", revision="v1", repo_type="kernel")
    pushed = _push(hub_env, scale_project, repo, "--variant", "torch-cpu", "--json")
    assert pushed.returncode == 0, pushed.stderr
    report = json.loads(pushed.stdout)
    assert report["plan"]["groups"]["torch-cpu"]["deleted"] == ["build/torch-cpu/stale.py"]
    assert report["plan"]["kept_variants"] == ["torch-cuda", "torch-xpu"]
    files = _branch_files(hub_env, repo, "v1")
    assert "build/torch-cpu/stale.py" not in files
    assert "build/torch-xpu/__init__.py" in files and "build/torch-cuda/__init__.py" in files


def test_dry_run_touches_nothing(hub_env, scale_project):
    repo = repo_name()
    dry = _push(hub_env, scale_project, repo, "--dry-run")
    assert dry.returncode == 1  # refused (torch-cuda untested), but the plan is printed
    assert "torch-cuda  3" in dry.stdout.replace("   ", "  ") or "torch-cuda" in dry.stdout
    assert "push refused" in dry.stderr and "--allow-untested" in dry.stderr
    assert not _api(hub_env).repo_exists(repo, repo_type="kernel")


def test_refuses_changed_files_failed_tests_and_abi(hub_env, scale_project):
    repo = repo_name()
    build_dir = scale_project / "build"
    (build_dir / "torch-cuda" / "_ops.py").write_text("# edited after the build\n")
    refused = _push(hub_env, scale_project, repo, "--allow-untested")
    assert refused.returncode == 1
    assert "torch-cuda: files changed after the build (digest mismatch): _ops.py: changed" in refused.stderr
    assert "publisher build --variant 'torch-cuda'" in refused.stderr

    fingerprint = state.variant_fingerprint(build_dir / "torch-cpu")
    state.update_report(state.test_report_path(build_dir), {"torch-cpu": {
        "status": "failed", "fingerprint": fingerprint, "on_hardware": True, "tests": {"failed": 2}}})
    state.update_report(state.build_report_path(build_dir), {"torch-cpu": {
        "state": "built", "fingerprint": fingerprint, "abi": {"ok": False, "violations": ["GLIBC_2.34 too new"]}}})
    refused = _push(hub_env, scale_project, repo, "--variant", "torch-cpu")
    assert "torch-cpu: tests failed (2 failed)" in refused.stderr
    assert "torch-cpu: ABI check failed: GLIBC_2.34 too new" in refused.stderr
    assert not _api(hub_env).repo_exists(repo, repo_type="kernel")


def test_auth_errors_explain_access_and_never_print_the_token(hub_env, scale_project):
    repo = repo_name()
    assert _push(hub_env, scale_project, repo, "--allow-untested").returncode == 0
    write_scale(scale_project, extra=" * 1")
    build(scale_project, hub_env.env(), "--variant", "torch-cuda")
    read_only = _push(hub_env, scale_project, repo, "--allow-untested", env=hub_env.env(hub_env.read_token))
    assert read_only.returncode == 1
    assert "forbidden (403)" in read_only.stderr and "write access" in read_only.stderr
    env = hub_env.env()
    env["HF_TOKEN"] = "hf_" + "Z" * 34  # unknown to the server
    unknown = _push(hub_env, scale_project, repo, "--allow-untested", env=env)
    assert unknown.returncode == 1 and "not authorised (401)" in unknown.stderr
    for output in (read_only.stdout + read_only.stderr, unknown.stdout + unknown.stderr):
        assert hub_env.read_token not in output and "Z" * 34 not in output and hub_env.write_token not in output


def test_no_artifact_contains_the_token(hub_env, scale_project):
    repo = repo_name()
    result = _push(hub_env, scale_project, repo, "--allow-untested")
    assert result.returncode == 0
    secrets = (hub_env.write_token.encode(), hub_env.read_token.encode())
    for root in (hub_env.data_dir, scale_project):
        for path in root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert not any(s in data for s in secrets), path
    assert not any(s.decode() in result.stdout + result.stderr for s in secrets)


def test_concurrent_pushes_one_wins_one_fails_cleanly(hub_env, scale_project, tmp_path):
    other = tmp_path / "other"
    subprocess.run(["cp", "-a", str(scale_project), str(other)], check=True)
    write_scale(other, extra=" - 1")
    build(other, hub_env.env())
    repo = repo_name()
    # Hold both commits (the staging commits of a new branch) long enough that both pushes are in flight.
    hub_env.fault("commit", action="delay", seconds=2.0, times=2)
    env = hub_env.env()
    procs = [subprocess.Popen([__import__("sys").executable, "-m", "publisher", "push", repo, str(p),
                               "--allow-untested"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in (scale_project, other)]
    outs = [p.communicate(timeout=240) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 1], outs
    loser = outs[codes.index(1)]
    assert "created by another push" in loser[1] or "moved while this push was running" in loser[1]
    assert "Traceback" not in loser[1]
    winner = (scale_project, other)[codes.index(0)]
    files = _branch_files(hub_env, repo, "v1")
    expected = {f.repo_path: f for v in ("torch-cpu", "torch-cuda") for f in variant_files(winner / "build" / v, v)}
    assert {p for p in files if p.startswith("build/")} == set(expected)
    assert all(files[p].blob_id == f.git_sha1 or (files[p].lfs and files[p].lfs.sha256 == f.sha256)
               for p, f in expected.items())
