"""`publisher build` with the Hub as a build cache, against the Hub-compatible
server: a variant the version branch holds with the same inputs is fetched
(verified against its digest) instead of compiled; anything else is built."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from huggingface_hub import CommitOperationAdd, HfApi

from publisher import state
from publisher.builder.metadata import read_metadata, recorded_inputs

from build_fixtures import write_tiny_project
from cli_helper import run_cli
from matrix_fixtures import local_variant_name
from push_fixtures import load_kernel, repo_name, write_scale


def _api(hub) -> HfApi:
    return HfApi(endpoint=hub.url, token=hub.write_token)


def _build(project: Path, env: dict, *args: str) -> dict:
    result = run_cli("build", "--local", "--json", *args, str(project), env=env, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    report["stderr"] = result.stderr
    return report


def _only(report: dict) -> dict:
    """The row of the variant --local builds with the running torch (cpu or cuXY)."""
    (row,) = [r for r in report["variants"] if r["variant"] == local_variant_name()]
    return row


def _commits(hub, repo: str) -> int:
    return len(_api(hub).list_repo_commits(repo, repo_type="kernel", revision="v1"))


def _git(root: Path, *argv: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *argv],
                   check=True, capture_output=True)


def _checkout(project: Path, dest: Path) -> Path:
    """A fresh clone: what a CI rerun starts from (no build folder)."""
    subprocess.run(["git", "clone", "-q", str(project), str(dest)], check=True)
    return dest


@pytest.mark.slow  # compiles the tiny project twice
def test_unchanged_inputs_are_fetched_from_the_hub_not_compiled(hub_env, tmp_path):
    project = write_tiny_project(tmp_path / "tiny", git=True)
    env = hub_env.env()
    repo = repo_name("tiny-scale")
    first = _only(_build(project, env, "--repo", repo))
    assert first["state"] == "built"  # the repo does not exist yet: nothing to fetch
    variant = first["variant"]
    built = project / "build" / variant
    assert recorded_inputs(read_metadata(built))  # the fingerprint travels in metadata.json
    # one local CPU variant of a CUDA+CPU kernel: --partial (the coverage gate)
    pushed = run_cli("push", repo, str(project), "--allow-untested", "--partial", "--no-card", env=env)
    assert pushed.returncode == 0, pushed.stderr
    commits = _commits(hub_env, repo)

    # a commit that changes no build input moves the git revision (the ops id's unique part): still a match
    (project / "NOTES.md").write_text("release notes\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "notes")
    rerun = _checkout(project, tmp_path / "rerun")
    report = _build(rerun, env, "--repo", repo)
    row = _only(report)
    assert row["state"] == "fetched", row
    assert row["from"].startswith(f"hub cache {repo}@"), row
    fetched = rerun / "build" / variant
    log = Path(row["log"]).read_text()
    assert "hub cache: inputs match" in log and "ninja" not in log
    assert not (state.state_dir(rerun / "build") / "work" / variant).exists()  # no compiler ran
    assert sorted(p.name for p in fetched.iterdir()) == sorted(p.name for p in built.iterdir())
    assert all((fetched / p.name).read_bytes() == p.read_bytes() for p in built.iterdir())
    entry = state.read_report(state.build_report_path(rerun / "build"))["variants"][variant]
    assert entry["state"] == "fetched" and entry["from"] == row["from"]

    # the fetched variant loads, and computes where its device is here (a CUDA variant needs a GPU)
    device = "cpu" if "-cpu-" in variant else "cuda"
    runs_here = device == "cpu" or torch.cuda.is_available()
    loaded = load_kernel(env, f"""
        import torch, kernels
        from pathlib import Path
        k = kernels.get_local_kernel(Path({str(rerun / 'build')!r}))
        print("LOADED", k.__name__)
        if {runs_here}:
            print("RESULT", k.scale(torch.arange(3.0, device={device!r}), 2.0).tolist())
    """)
    assert "LOADED" in loaded.stdout, loaded.stderr
    assert "RESULT [0.0, 2.0, 4.0]" in loaded.stdout or not runs_here, loaded.stderr

    # the release rerun publishes without rebuilding: nothing changed, no commit
    again = run_cli("push", repo, str(rerun), "--allow-untested", "--partial", "--no-card", env=env)
    assert again.returncode == 0, again.stderr
    assert "nothing changed: no commit" in again.stdout
    assert _commits(hub_env, repo) == commits

    # a changed source is a different build: compiled, not fetched
    source = rerun / ("scale_cpu/scale.cpp" if "-cpu-" in variant else "scale_cuda/scale.cu")
    source.write_text(source.read_text() + "\n// changed\n")
    changed = _only(_build(rerun, env, "--repo", repo))
    assert changed["state"] == "built" and changed["from"] is None
    assert "was built from other inputs; building" in Path(changed["log"]).read_text()
    assert (state.state_dir(rerun / "build") / "work" / variant).is_dir()


@pytest.mark.slow  # the session's built and tested project, pushed and fetched back
def test_opt_out_unreachable_and_tampered_hub_builds(hub_env, scale_project, tmp_path):
    env = hub_env.env()
    repo = repo_name()
    pushed = run_cli("push", repo, str(scale_project), "--allow-untested", "--no-card", env=env)
    assert pushed.returncode == 0, pushed.stderr
    fresh = tmp_path / "fresh"
    shutil.copytree(scale_project, fresh, ignore=shutil.ignore_patterns("build"))

    def cpu(*args: str) -> tuple[dict, str]:
        out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
        report = _build(fresh, env, "--variant", "torch-cpu", "--out", str(out), *args)
        (row,) = report["variants"]
        return row, report["stderr"]

    row, _ = cpu("--repo", repo)
    assert row["state"] == "fetched"

    row, _ = cpu("--repo", repo, "--no-hub-cache")
    assert row["state"] == "built" and "hub cache" not in Path(row["log"]).read_text()

    row, stderr = cpu("--repo", repo, "--endpoint", "http://127.0.0.1:9")
    assert row["state"] == "built"
    notes = [line for line in stderr.splitlines() if line.startswith("note: hub cache")]
    assert len(notes) == 1 and "building every variant" in notes[0], stderr
    assert "Traceback" not in stderr and hub_env.write_token not in stderr

    # a file changed on the Hub after its metadata.json was written: never used
    _api(hub_env).create_commit(repo, [CommitOperationAdd("build/torch-cpu/table.bin", b"tampered")],
                                commit_message="tamper", repo_type="kernel", revision="v1")
    row, _ = cpu("--repo", repo)
    assert row["state"] == "built"
    assert "does not match its own digest (table.bin: changed after the build" in Path(row["log"]).read_text()

    # changed sources: other inputs
    write_scale(fresh, extra=" * 1")
    row, _ = cpu("--repo", repo)
    assert row["state"] == "built"
    assert "was built from other inputs" in Path(row["log"]).read_text()


def test_a_bad_repo_id_is_a_usage_error_before_anything_builds(hub_env, tmp_path):
    project = tmp_path / "scale"
    write_scale(project)
    result = run_cli("build", "--local", "--repo", "not a repo", str(project), env=hub_env.env())
    assert result.returncode == 2, result.stderr
    assert "--repo: `not a repo` is not a Hub repo id" in result.stderr and "--no-hub-cache" in result.stderr
    assert "Traceback" not in result.stderr and not (project / "build").exists()
