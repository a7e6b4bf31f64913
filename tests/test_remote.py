"""`publisher test --on hf-jobs:...`: the variants go to Hugging Face Jobs (our
Hub-compatible server's Jobs API here), the results come back into the test
report. Quick tests cover the parts (places, images, the result frames, the
merge, the runner's refusals against the real Jobs API); the slow test runs
whole jobs through the process executor, publisher installed in the job from
the wheel the run carries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from publisher.errors import AuthError, UsageError
from publisher.remote import frames
from publisher.remote.images import image_for
from publisher.remote.place import parse_place
from publisher.remote.request import JobRequest
from publisher.remote.results import entries_from, gpus_passed
from publisher.remote.runner import JobOutcome, JobPlan, RemoteOptions, Target
from publisher.remote.stage import estimate, plan_jobs
from publisher.remote.wheel import build_wheel

REPO = Path(__file__).resolve().parents[1]
PUBLISHER = Path(sys.executable).parent / "publisher"


# -- places and images ---------------------------------------------------------------
def test_on_names_a_place_and_its_targets():
    place = parse_place("hf-jobs:l4x1, a100-large,l4x1")
    assert place.info.key == "hf-jobs" and place.targets == ("l4x1", "a100-large") and str(place) == "hf-jobs:l4x1,a100-large"


@pytest.mark.parametrize("text, says", [
    ("ssh:box", "unknown place 'ssh'"),
    ("hf-jobs", "needs at least one hardware flavour"),
    ("hf-jobs:", "needs at least one hardware flavour"),
    ("hf-jobs:l4x1;rm -rf /", "is not a hardware flavour name"),
])
def test_a_wrong_place_is_a_usage_error_with_an_example(text, says):
    with pytest.raises(UsageError) as err:
        parse_place(text)
    assert says in err.value.message and "hf-jobs:l4x1" in (err.value.hint or "")


def test_each_variant_gets_a_pytorch_image_with_its_torch_and_cuda():
    assert image_for("torch211-cxx11-cu130-x86_64-linux") == "pytorch/pytorch:2.11.0-cuda13.0-cudnn9-runtime"
    assert image_for("torch28-cxx11-cu126-x86_64-linux") == "pytorch/pytorch:2.8.0-cuda12.6-cudnn9-runtime"
    # a cpu variant runs on a CUDA build of its own torch
    assert image_for("torch211-cxx11-cpu-x86_64-linux").startswith("pytorch/pytorch:2.11.0-cuda")
    # a CUDA version that torch release was never published with: no image
    assert image_for("torch28-cxx11-cu130-x86_64-linux") is None
    assert image_for("torch-cuda").startswith("pytorch/pytorch:")
    assert image_for("torch211-cxx11-rocm64-x86_64-linux") is None


def test_every_cell_of_the_default_matrix_a_job_can_build_has_its_images():
    """The packaged matrix's x86_64-linux cpu and CUDA cells, for test and build jobs: a torch release the
    matrix gains without images here fails this test (and every such variant would need --image)."""
    from publisher.data import read_yaml
    cells = [(str(t["version"]), f["compute"]) for t in read_yaml("matrix.yaml")["torch"] for f in t["flavours"]
             if "x86_64-linux" in f["platforms"] and (f["compute"] == "cpu" or f["compute"].startswith("cu"))]
    assert len(cells) >= 8
    for version, compute in cells:
        name = f"torch{version.replace('.', '')}-cxx11-{compute}-x86_64-linux"
        for build in (False, True):
            image = image_for(name, build=build)
            assert image and f":{version}." in image and image.endswith("-devel" if build else "-runtime"), (name, image)
            if compute != "cpu":
                assert f"-cuda{compute[2:-1]}.{compute[-1]}-" in image, (name, image)


def _planned(name: str):
    from publisher.plan.planner import PlannedVariant
    from publisher.plan.variants import Variant
    from publisher.toolchains.spec import ToolchainSpec
    variant = Variant.parse(name)
    platform = str(variant.platform) if variant.platform else "x86_64-linux"
    return PlannedVariant(variant=variant, toolchain=ToolchainSpec(
        torch=variant.version or "2.15", compute=variant.compute if variant.platform else "cpu", platform=platform,
        index_url=None, torch_requirement="torch==2.15.*"), required=True)


@pytest.mark.parametrize("name, says", [
    ("torch215-cxx11-cu130-x86_64-linux", None),
    ("torch215-cxx11-cpu-x86_64-linux", None),
    ("torch-cuda", None),
    ("torch215-cxx11-cu130-aarch64-linux", "runs x86_64-linux machines only; build aarch64-linux variants"),
    ("torch215-cpu-aarch64-darwin", "runs x86_64-linux machines only; build aarch64-darwin variants"),
    ("torch215-cxx11-rocm71-x86_64-linux", "the rocm toolchain (ROCm hipcc) is not installable from PyPI"),
    ("torch215-cxx11-xpu20253-x86_64-linux", "the xpu toolchain (Intel oneAPI DPC++) is not installable"),
])
def test_a_build_job_is_started_only_for_a_variant_the_place_can_build(name, says):
    from publisher.remote.build import cannot_build_there
    why = cannot_build_there(_planned(name), parse_place("hf-jobs:cpu-xl"))
    assert (why is None) if says is None else (says in why), why


def test_a_build_on_starts_no_job_for_variants_built_from_the_same_inputs(tmp_path):
    """build/<variant>/ made from these inputs (here, or by an earlier job) is kept: no job, no Hub call
    (the endpoint here refuses every connection); --force would send it again."""
    import shutil
    project = tmp_path / "softcap"
    shutil.copytree(REPO / "kernel_projects" / "softcap", project, ignore=shutil.ignore_patterns("build"))
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9", HF_TOKEN="hf_" + "z" * 34)
    subprocess.run([str(PUBLISHER), "build", str(project)], check=True, env=env, capture_output=True)
    out = subprocess.run([str(PUBLISHER), "build", str(project), "--on", "hf-jobs:cpu-upgrade", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert {v["variant"]: v["state"] for v in json.loads(out.stdout)["variants"]} == {"torch-cpu": "cached",
                                                                                     "torch-cuda": "cached"}
    assert "build/torch-cpu was built from these inputs; no job needed" in out.stderr
    (project / "torch-ext" / "softcap" / "__init__.py").write_text(
        (project / "torch-ext" / "softcap" / "__init__.py").read_text() + "\n# changed\n")
    out = subprocess.run([str(PUBLISHER), "build", str(project), "--on", "hf-jobs:cpu-upgrade", "--no-hub-cache"],
                         capture_output=True, text=True, env=env, timeout=120)
    # changed sources: the variants go to jobs (which this endpoint cannot start: a clear error, no traceback)
    assert out.returncode != 0 and "list the Jobs hardware" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_job_fingerprints_the_sources_this_machine_fingerprints(tmp_path):
    """The run folder leaves out environments, egg-info and build folders; the fingerprint must leave
    out the same, or every variant a job built would look stale here and be built again."""
    import shutil

    from publisher.builder.inputs import source_digest
    from publisher.project.load import require_project
    from publisher.remote.bundle import make_run_folder
    project = tmp_path / "softcap"
    shutil.copytree(REPO / "kernel_projects" / "softcap", project, ignore=shutil.ignore_patterns("build"))
    for path, text in {"venv/lib/site.py": "x = 1\n", "torch-ext/softcap.egg-info/PKG-INFO": "Name: softcap\n",
                       "out/.publisher/build.json": "{}", "out/torch-cpu/x.py": "", ".clang-format": "{}\n",
                       "scripts/build": "#!/bin/sh\n"}.items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text)
    run = make_run_folder(tmp_path / "run", project, project / "build", [], {})
    sent = run / "project"
    assert not (sent / "venv").exists() and not (sent / "out").exists()
    assert not (sent / "torch-ext" / "softcap.egg-info").exists() and (sent / ".clang-format").is_file()
    assert (sent / "scripts" / "build").is_file()  # a file named like a build folder is a source
    assert source_digest(require_project(sent)) == source_digest(require_project(project))


def test_build_jobs_are_one_per_variant_or_one_per_image_as_asked():
    from publisher.remote.build import group_jobs
    images = {"a": "img:1", "b": "img:2", "c": "img:1"}
    assert group_jobs(["a", "b", "c"], images, "variant") == [("a", "img:1", ("a",)), ("b", "img:2", ("b",)),
                                                              ("c", "img:1", ("c",))]
    assert group_jobs(["a", "b", "c"], images, "image") == [("a+1", "img:1", ("a", "c")), ("b", "img:2", ("b",))]
    assert parse_place("hf-jobs:cpu-xl").info.build_jobs == "variant"  # the default, from places.yaml
    with pytest.raises(UsageError):
        group_jobs(["a"], images, "flavour")


@pytest.mark.parametrize("argv", [["--debug"], ["--backend", "docker"], ["--jobs", "2"], ["--local"]])
def test_build_options_a_job_would_ignore_are_refused_with_on(argv):
    out = subprocess.run([str(PUBLISHER), "build", str(REPO / "kernel_projects" / "softcap"), "--on",
                          "hf-jobs:cpu-upgrade", *argv], capture_output=True, text=True,
                         env=dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9"))
    assert out.returncode == 2 and argv[0] in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_build_job_options_without_on_are_refused():
    out = subprocess.run([str(PUBLISHER), "build", str(REPO / "kernel_projects" / "softcap"), "--one-job-per", "image"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "go with --on PLACE:FLAVOUR" in out.stderr, out.stderr


@pytest.mark.parametrize("argv, says", [
    (["--local", "--build-on", "hf-jobs:cpu-xl"], "--local and --build-on exclude each other"),
    (["--max-parallel", "2"], "--build-image, --max-parallel and --one-job-per go with --build-on"),
    (["--build-on", "hf-jobs:cpu-xl,cpu-upgrade"], "builds run on one flavour"),
])
def test_release_build_on_refuses_what_it_cannot_do(argv, says, tmp_path):
    import shutil
    project = tmp_path / "softcap"
    shutil.copytree(REPO / "kernel_projects" / "softcap", project, ignore=shutil.ignore_patterns("build"))
    out = subprocess.run([str(PUBLISHER), "release", str(project), "--repo", "o/n", *argv], capture_output=True,
                         text=True, env=dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9"), timeout=120)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


def _target(name="l4x1", backend="cuda", price=0.8):
    return Target(name=name, pretty=name.upper(), backend=backend, gpu="1x L4 (24 GB)" if backend != "cpu" else None,
                  usd_per_hour=price)


def test_one_job_per_target_and_image_and_the_cost_bound_is_shown():
    variants = ["torch211-cxx11-cu130-x86_64-linux", "torch210-cxx11-cu130-x86_64-linux",
                "torch211-cxx11-cpu-x86_64-linux", "torch299-cxx11-cu130-x86_64-linux"]
    plans, unplaced = plan_jobs(variants, [_target("l4x1"), _target("h200", price=5.0)],
                                lambda names: JobRequest(kind="test", variants=names), image=None)
    assert sorted(p.key for p in plans) == ["h200-1", "h200-2", "l4x1-1", "l4x1-2"]
    assert all(len(p.request.variants) == 1 for p in plans)
    assert list(unplaced) == ["torch299-cxx11-cu130-x86_64-linux"]  # a torch no image is known for
    lines = estimate(plans, 1800)
    assert lines[-1].startswith("  estimated cost: at most $5.80 ")  # (0.8 + 0.8 + 5 + 5) / 2
    one, _ = plan_jobs(variants[:2], [_target()], lambda n: JobRequest(kind="test", variants=n), image="my/image:1")
    assert [(p.key, p.image, p.request.variants) for p in one] == [("l4x1", "my/image:1", tuple(variants[:2]))]


# -- the result's way back -----------------------------------------------------------
def test_a_result_survives_the_log_and_a_cut_log_is_no_result():
    payload = {"ok": True, "entries": {"v": {"output_tail": os.urandom(9000).hex()}}}
    lines = frames.encode(payload)
    assert len(lines) > 2 and all(len(line) < 3100 for line in lines)
    log = ["pip noise"] + lines[:2] + ["more noise"] + lines[2:]
    assert frames.decode(log) == payload
    assert frames.decode(["noise"] + lines[:-1]) is None
    tampered = lines[:1] + [lines[1][:-5] + "AAAAA"] + lines[2:]
    assert frames.decode(tampered) is None
    newer = {"ok": False, "error": "x"}
    assert frames.decode(lines + frames.encode(newer)) == newer


def _outcome(variants, payload=None, stage="COMPLETED", message="", target=None, job="j1"):
    plan = JobPlan(key=(target or _target()).name, target=target or _target(), image="img",
                   request=JobRequest(kind="test", variants=tuple(variants)))
    return JobOutcome(plan, job_id=job, url=f"https://hub/jobs/{job}", stage=stage, message=message, payload=payload,
                      log=["publisher job: starting", "Traceback: boom"])


def _entry(status, fingerprint="f1", gpu="NVIDIA L4"):
    return {"status": status, "fingerprint": fingerprint, "on_hardware": status == "passed",
            "device": {"gpu": gpu}, "tests": {"passed": 3}, "log": "/tmp/publisher-run.x/log"}


def test_job_results_are_merged_with_the_job_and_the_worst_run_stands():
    v = "torch211-cxx11-cu130-x86_64-linux"
    l4 = _outcome([v], {"ok": True, "entries": {v: _entry("passed")}}, target=_target("l4x1"), job="a")
    t4 = _outcome([v], {"ok": True, "entries": {v: _entry("failed", gpu="Tesla T4")}}, target=_target("t4-small"), job="b")
    merged = entries_from("hf-jobs", [l4, t4], {v: "f1"})[v]
    assert merged["status"] == "failed" and merged["device"]["gpu"] == "Tesla T4"
    assert [(r["flavor"], r["gpu"], r["status"], r["job"]) for r in merged["runs"]] == [
        ("l4x1", "NVIDIA L4", "passed", "a"), ("t4-small", "Tesla T4", "failed", "b")]
    assert merged["log"] == "https://hub/jobs/b"  # not a path inside the job
    assert gpus_passed(merged) == ["NVIDIA L4"]
    both = entries_from("hf-jobs", [l4, _outcome([v], {"ok": True, "entries": {v: _entry("passed", gpu="H200")}})],
                        {v: "f1"})[v]
    assert both["status"] == "passed" and gpus_passed(both) == ["NVIDIA L4", "H200"]


@pytest.mark.parametrize("outcome_kw, reason, fix", [
    ({"stage": "ERROR", "message": "Job timed out: it ran longer than its timeout of 60 seconds"},
     "ran out of time", "--job-timeout"),
    ({"stage": "ERROR", "message": "Failed to pull image 'x'"}, "could not start the image", "--image"),
    ({"stage": "ERROR", "message": "exit code 1"}, "ended ERROR: exit code 1 before it reported", "job's log"),
    ({"payload": {"ok": False, "error": "no build.toml", "hint": "fix it"}}, "test stage stopped: no build.toml", "fix it"),
    ({"stage": "CANCELED", "message": "interrupted"}, "was cancelled", "test again"),
])
def test_a_job_without_a_result_is_an_error_never_a_failure(outcome_kw, reason, fix):
    v = "torch211-cxx11-cu130-x86_64-linux"
    entry = entries_from("hf-jobs", [_outcome([v], **outcome_kw)], {v: "f1"})[v]
    assert entry["status"] == "error" and reason in entry["reason"] and fix in entry["fix"]
    assert entry["fingerprint"] == "f1" and "Traceback: boom" in entry["output_tail"]


def test_a_result_for_another_build_of_the_variant_is_not_taken():
    v = "torch211-cxx11-cu130-x86_64-linux"
    entry = entries_from("hf-jobs", [_outcome([v], {"ok": True, "entries": {v: _entry("passed", "old")}})],
                         {v: "new"})[v]
    assert entry["status"] == "error" and "different build" in entry["reason"]


def test_the_wheel_is_the_running_publisher(tmp_path):
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = whl.read(meta).decode()
        job = whl.read("publisher/remote/job.py")
    assert job == (REPO / "publisher" / "remote" / "job.py").read_bytes()
    assert "Requires-Dist: kernels" in requires and not any(n.endswith(".pyc") for n in names)
    # the installed METADATA as it is, long description included: re-serializing it broke on a README
    # line that reads like a header ("`kernels.get_kernel`: check, ...")
    import importlib.metadata

    dist = importlib.metadata.distribution("kernel-publisher")
    assert requires == (dist.read_text("METADATA") or dist.read_text("PKG-INFO"))


# -- the runner against the Jobs API ---------------------------------------------------
def _runner(hub, token, flavors=("t4-small",)):
    from publisher.remote.hf_jobs import make_runner
    return make_runner(flavors, RemoteOptions(endpoint=hub.url, token=token, job_timeout=60))


class _Events:
    def __init__(self):
        self.lines = []

    def note(self, line):
        self.lines.append(line)

    def job_stage(self, outcome):
        self.lines.append(f"{outcome.job_id} {outcome.stage}")

    def job_line(self, outcome, line):
        self.lines.append(line)


def test_an_unknown_flavour_or_one_without_the_gpu_is_refused_before_anything_is_sent(jobs_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    with pytest.raises(UsageError) as err:
        _runner(jobs_hub, jobs_hub.write_token, ("l4x9",)).targets(["cuda"])
    assert "no flavour 'l4x9'" in err.value.message and "t4-small" in err.value.hint and "cpu-basic" not in err.value.hint
    with pytest.raises(UsageError) as err:
        _runner(jobs_hub, jobs_hub.write_token, ("cpu-basic",)).targets(["cuda"])
    assert "no GPU" in err.value.message and "cuda" in err.value.message
    [t4] = _runner(jobs_hub, jobs_hub.write_token).targets(["cuda", "cpu"])
    assert (t4.backend, t4.gpu, round(t4.usd_per_hour, 2)) == ("cuda", "1x T4 (16 GB)", 0.4)


def test_a_token_without_job_write_is_told_how_to_get_one_and_nothing_stays_staged(jobs_hub, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    (tmp_path / "run" / "requests").mkdir(parents=True)
    (tmp_path / "run" / "requests" / "t4-small.json").write_text("{}")
    runner = _runner(jobs_hub, jobs_hub.no_jobs_token)
    [target] = runner.targets(["cuda"])
    plan = JobPlan("t4-small", target, "img", JobRequest(kind="test", variants=("v",)))
    events = _Events()
    with pytest.raises(AuthError) as err:
        runner.run([plan], tmp_path / "run", events)
    assert "may not run Jobs" in err.value.message and "job.write" in err.value.hint
    assert jobs_hub.no_jobs_token not in str(err.value) + str(err.value.hint)
    staged = HfApi(endpoint=jobs_hub.url, token=jobs_hub.write_token).list_repo_files(
        f"{jobs_hub.user}/publisher-staging", repo_type="model")
    assert not [f for f in staged if f.startswith("runs/")]
    assert HfApi(endpoint=jobs_hub.url, token=jobs_hub.write_token).repo_info(
        f"{jobs_hub.user}/publisher-staging", repo_type="model").private


def test_no_token_is_a_clear_error(jobs_hub, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", "/nonexistent/token")
    runner = _runner(jobs_hub, None)
    with pytest.raises(AuthError) as err:
        runner.namespace  # noqa: B018
    assert "need a token" in err.value.message and "job.write" in err.value.hint


@pytest.mark.parametrize("argv", [["test", "--on"], ["release", "--repo", "o/n", "--test-on"],
                                  ["release", "--repo", "o/n", "--build-on"], ["build", "--on"]])
def test_the_cli_refuses_a_bad_place_without_a_traceback(argv):
    out = subprocess.run([str(PUBLISHER), argv[0], str(REPO / "kernel_projects" / "softcap"), *argv[1:], "k8s:pod"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "unknown place 'k8s'" in out.stderr and "Traceback" not in out.stderr, out.stderr


# -- whole jobs ---------------------------------------------------------------------------
def _serve(tmp_path: Path, token: str, python3: Path, site: Path) -> tuple[subprocess.Popen, str]:
    """publisher hub-server with the process executor; its jobs find `python3` and the packages in site."""
    port_file = tmp_path / "server.log"
    bin_dir = tmp_path / "job-bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python3)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHONPATH=str(site))
    env.pop("HF_TOKEN", None)
    proc = subprocess.Popen([str(PUBLISHER), "hub-server", "--port", "0", "--data-dir", str(tmp_path / "hub"),
                             "--token", token, "--jobs-executor", "process"],
                            stdout=port_file.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = port_file.read_text()
        for word in text.split():
            if word.startswith("http://127.0.0.1:"):
                return proc, word.rstrip("/.,")
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"the hub-server did not start: {port_file.read_text()}")


@pytest.mark.slow
def test_variants_are_tested_in_jobs_and_the_report_says_where(tmp_path):
    # The job machine: the system python3, this environment's packages (torch, kernels, pytest) on
    # PYTHONPATH as an image has them; each job makes its own venv and installs the wheel the run carries.
    import torch
    site = Path(torch.__file__).parents[1]
    python3 = Path("/usr/bin/python3")
    token = "hf_" + "j" * 34
    proc, url = _serve(tmp_path, token, python3, site)
    try:
        project = tmp_path / "softcap"
        import shutil
        shutil.copytree(REPO / "kernel_projects" / "softcap", project, ignore=shutil.ignore_patterns("build"))
        env = dict(os.environ, HF_ENDPOINT=url, HF_TOKEN=token, HF_HUB_DISABLE_XET="1")
        subprocess.run([str(PUBLISHER), "build", str(project), "--local"], check=True, env=env, capture_output=True)
        out = subprocess.run([str(PUBLISHER), "test", str(project), "--on", "hf-jobs:cpu-basic,t4-small",
                              "--job-timeout", "10m"], capture_output=True, text=True, env=env, timeout=900)
        log = out.stdout + out.stderr
        assert "estimated cost: at most $0.07" in log, log
        report = json.loads((project / "build" / ".publisher" / "test-report.json").read_text())["variants"]
        cpu, cuda = report["torch-cpu"], report["torch-cuda"]
        # the cpu variant ran its tests in the cpu-basic job, with accelerators hidden
        assert cpu["status"] == "passed" and cpu["tests"]["passed"] > 0 and cpu["runs"][0]["flavor"] == "cpu-basic", log
        # the CUDA variant found no GPU in the t4-small stand-in (this machine has none): never passed, never failed
        assert cuda["status"] in ("loaded-not-run", "error") and cuda["runs"][0]["flavor"] == "t4-small", log
        assert out.returncode == 1, log
        api = HfApi(endpoint=url, token=token)
        jobs = {j.id: j for j in api.list_jobs(namespace="publisher-dev")}
        assert {cpu["runs"][0]["job"], cuda["runs"][0]["job"]} <= set(jobs)
        for job in jobs.values():  # the jobs had no token: not in their environment, secrets or logs
            assert not job.secrets and token not in json.dumps(job.environment or {})
            assert token not in "\n".join(api.fetch_job_logs(job_id=job.id, namespace="publisher-dev"))
        staged = api.list_repo_files("publisher-dev/publisher-staging", repo_type="model")
        assert not [f for f in staged if f.startswith("runs/")], staged
        # a job that outlives --job-timeout comes back as an error that says what to raise
        out = subprocess.run([str(PUBLISHER), "test", str(project), "--on", "hf-jobs:cpu-basic", "--variant", "torch-cpu",
                              "--job-timeout", "2s"], capture_output=True, text=True, env=env, timeout=300)
        cpu = json.loads((project / "build" / ".publisher" / "test-report.json").read_text())["variants"]["torch-cpu"]
        assert out.returncode == 1 and cpu["status"] == "error" and "--job-timeout" in cpu["fix"], out.stderr
        # Ctrl-C while a job runs: the job is cancelled, nothing stays staged, the command says so
        (project / "tests" / "test_zz_slow.py").write_text(
            "import time\n\nimport pytest\n\n\n@pytest.mark.kernels_ci\ndef test_slow():\n    time.sleep(300)\n")
        running = subprocess.Popen([str(PUBLISHER), "test", str(project), "--on", "hf-jobs:cpu-basic", "--variant",
                                    "torch-cpu"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        deadline = time.monotonic() + 240
        job = None
        while time.monotonic() < deadline and job is None:
            time.sleep(1)
            job = next((j for j in api.list_jobs(namespace="publisher-dev") if j.id not in jobs
                        and j.status.stage == "RUNNING"), None)
        assert job is not None, "the job never ran"
        time.sleep(3)
        running.send_signal(2)
        said, _ = running.communicate(timeout=120)
        assert running.returncode == 130, said
        assert f"interrupted: cancelled job {job.id} (cpu-basic)" in said, said
        assert api.inspect_job(job_id=job.id, namespace="publisher-dev").status.stage == "CANCELED"
        assert not [f for f in api.list_repo_files("publisher-dev/publisher-staging", repo_type="model")
                    if f.startswith("runs/")]
        (project / "tests" / "test_zz_slow.py").unlink()
        # release --test-on: the cpu variant tested in a job, then published to the server
        out = subprocess.run([str(PUBLISHER), "release", str(project), "--repo", "publisher-dev/softcap", "--variant",
                              "torch-cpu", "--partial", "--test-on", "hf-jobs:cpu-basic", "--job-timeout", "10m"],
                             capture_output=True, text=True, env=env, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
        entry = json.loads((project / "build" / ".publisher" / "test-report.json").read_text())["variants"]["torch-cpu"]
        assert entry["status"] == "passed" and entry["runs"][0]["flavor"] == "cpu-basic"
        assert "torch-cpu" in {f.split("/")[1] for f in api.list_repo_files("publisher-dev/softcap", repo_type="kernel",
                                                                           revision="v1") if f.startswith("build/")}
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


@pytest.mark.slow
def test_variants_are_benchmarked_in_jobs_and_filed_with_the_job(tmp_path):
    import torch

    from bench_fixtures import TWICE_FILES, write_benchmarks
    from smoke_fixtures import write_files
    site = Path(torch.__file__).parents[1]
    token = "hf_" + "b" * 34
    proc, url = _serve(tmp_path, token, Path("/usr/bin/python3"), site)
    try:
        project = write_benchmarks(write_files(tmp_path / "twice", TWICE_FILES), {"benchmark.py": (
            "import torch\nfrom kernels.benchmark import Benchmark\n\n\nclass Twice(Benchmark):\n"
            "    def setup(self):\n        self.x = torch.randn(64, 64, device=self.device)\n\n"
            "    def benchmark_small(self):\n        self.out = self.kernel.twice(self.x)\n\n"
            "    def verify_small(self):\n        return self.x * 2\n")})
        env = dict(os.environ, HF_ENDPOINT=url, HF_TOKEN=token, HF_HUB_DISABLE_XET="1")
        subprocess.run([str(PUBLISHER), "build", str(project)], check=True, env=env, capture_output=True)
        out = subprocess.run([str(PUBLISHER), "bench", str(project), "--on", "hf-jobs:cpu-basic", "--iterations", "3",
                              "--job-timeout", "10m", "--json"], capture_output=True, text=True, env=env, timeout=900)
        assert out.returncode == 0, out.stdout + out.stderr
        report = json.loads(out.stdout)
        cpu, cuda = report["variants"]["torch-cpu"], report["variants"]["torch-cuda"]
        # benchmarked in the cpu-basic job by the bench stage, filed here under the job's CPU with the job
        assert cpu["status"] == "ok" and cpu["workloads"][0]["status"] == "verified", cpu
        assert cpu["device"]["flavor"] == "cpu-basic" and cpu["device"]["place"] == "hf-jobs" and cpu["device"]["job"]
        (path,) = report["files"]
        filed = json.loads(Path(path).read_text())["variants"]["torch-cpu"]
        assert filed["device"]["job"] == cpu["device"]["job"] and filed["fingerprint"] == cpu["fingerprint"]
        # no flavour asked for runs CUDA variants: not sent, said so
        assert cuda["status"] == "skipped" and "no target of hf-jobs:cpu-basic runs cuda variants" in cuda["reason"]
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


# -- the Docker path: the job in a container of its image ------------------------------------------
JOB_IMAGE = "publisher-test/job-python-torch:cpu-gxx"  # a -devel image stand-in: builds need a compiler
JOB_DOCKERFILE = """\
FROM {base}
COPY ca-bundle.crt /opt/job-setup/
COPY wheels/ /opt/job-setup/wheels/
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 python3-venv g++ ca-certificates \\
    >/dev/null && rm -rf /var/lib/apt/lists/*
# torch and publisher's dependencies, as a PyTorch image has torch and pip can fetch the rest; publisher
# itself is not in the image: the job installs the wheel its run carries
RUN python3 -m venv /opt/py && PIP_CERT=/opt/job-setup/ca-bundle.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \\
    /opt/py/bin/pip install -q --no-cache-dir /opt/job-setup/wheels/*.whl \\
    && /opt/py/bin/pip uninstall -y -q kernel-publisher && rm -rf /opt/job-setup
ENV PATH=/opt/py/bin:$PATH
"""


def _job_image(tmp: Path) -> str:
    """A local stand-in for a PyTorch image (public images cannot be pulled here): Debian's Python,
    this machine's torch wheel, publisher's dependencies."""
    import ssl

    if subprocess.run(["docker", "image", "inspect", JOB_IMAGE], capture_output=True).returncode == 0:
        return JOB_IMAGE
    base = os.environ.get("PUBLISHER_DOCKER_BASE_IMAGE", "publisher-base:bookworm")
    context = tmp / "job-image"
    (context / "wheels").mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(context / "wheels"),
                    "--extra-index-url", "https://download.pytorch.org/whl/cpu", f"torch=={torch_version()}"],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(context / "wheels"), str(REPO)], check=True, capture_output=True)
    ca = ssl.get_default_verify_paths().cafile
    (context / "ca-bundle.crt").write_bytes(Path(ca).read_bytes() if ca and Path(ca).is_file() else b"")
    (context / "Dockerfile").write_text(JOB_DOCKERFILE.format(base=base))
    built = subprocess.run(["docker", "build", "-q", "-t", JOB_IMAGE, str(context)], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    return JOB_IMAGE


def torch_version() -> str:
    import torch
    return torch.__version__


@pytest.mark.slow
@pytest.mark.docker
def test_a_variant_is_tested_in_a_container_of_the_jobs_image(tmp_path):
    import shutil

    image = _job_image(tmp_path)
    token = "hf_" + "k" * 34
    from publisher.hub_server.server import HubServer, ServerConfig

    server = HubServer(tmp_path / "hub", ServerConfig(tokens={token: "write"}, jobs_executor="docker")).start()
    try:
        project = tmp_path / "softcap"
        shutil.copytree(REPO / "kernel_projects" / "softcap", project, ignore=shutil.ignore_patterns("build"))
        env = dict(os.environ, HF_ENDPOINT=server.url, HF_TOKEN=token, HF_HUB_DISABLE_XET="1")
        subprocess.run([str(PUBLISHER), "build", str(project), "--local", "--variant", "torch-cpu"], check=True, env=env,
                       capture_output=True)
        out = subprocess.run([str(PUBLISHER), "test", str(project), "--variant", "torch-cpu", "--on",
                              "hf-jobs:cpu-upgrade", "--image", image, "--job-timeout", "15m"],
                             capture_output=True, text=True, env=env, timeout=1200)
        log = out.stdout + out.stderr
        assert out.returncode == 0, log[-6000:]
        entry = json.loads((project / "build" / ".publisher" / "test-report.json").read_text())["variants"]["torch-cpu"]
        assert entry["status"] == "passed" and entry["tests"]["passed"] > 0, log[-6000:]
        assert entry["runs"][0]["flavor"] == "cpu-upgrade" and entry["runs"][0]["image"] == image
        assert entry["device"]["torch"] == torch_version()
        job = HfApi(endpoint=server.url, token=token).inspect_job(job_id=entry["runs"][0]["job"], namespace="publisher-dev")
        assert job.docker_image == image and job.status.stage == "COMPLETED" and not job.secrets
        assert token not in log
    finally:
        server.close()


# -- builds in jobs --------------------------------------------------------------------------------
@pytest.mark.slow
def test_variants_are_built_in_parallel_jobs_and_a_failed_one_alone_is_rebuilt(tmp_path):
    import torch
    site = Path(torch.__file__).parents[1]
    token = "hf_" + "b" * 34
    proc, url = _serve(tmp_path, token, Path("/usr/bin/python3"), site)
    try:
        _build_rehearsal(tmp_path, url, token, [])
        _release_built_in_jobs(tmp_path / "softcap", url, token)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


@pytest.mark.slow
@pytest.mark.docker
def test_builds_in_containers_of_the_jobs_image(tmp_path):
    from publisher.hub_server.server import HubServer, ServerConfig

    image = _job_image(tmp_path)
    token = "hf_" + "c" * 34
    server = HubServer(tmp_path / "hub", ServerConfig(tokens={token: "write"}, jobs_executor="docker")).start()
    try:
        _build_rehearsal(tmp_path, server.url, token, ["--image", image])
    finally:
        server.close()


def _release_built_in_jobs(project: Path, url: str, token: str) -> None:
    """After the rehearsal: nothing changed, so no job; `release --build-on` builds the missing variant in a
    job, tests and publishes it; a later build takes it from the Hub cache instead of starting a job."""
    import shutil
    env = dict(os.environ, HF_ENDPOINT=url, HF_TOKEN=token, HF_HUB_DISABLE_XET="1")
    api = HfApi(endpoint=url, token=token)

    def build_jobs() -> list:
        return [j for j in api.list_jobs(namespace="publisher-dev") if (j.labels or {}).get("publisher") == "build"]

    seen = {j.id for j in build_jobs()}
    out = subprocess.run([str(PUBLISHER), "build", str(project), "--on", "hf-jobs:cpu-upgrade", "--json"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert {v["variant"]: v["state"] for v in json.loads(out.stdout)["variants"]} == {
        "torch-cpu": "cached", "torch-cuda": "cached"} and out.returncode == 0, out.stderr[-3000:]
    assert {j.id for j in build_jobs()} == seen

    shutil.rmtree(project / "build" / "torch-cpu")
    out = subprocess.run([str(PUBLISHER), "release", str(project), "--repo", "publisher-dev/softcap", "--variant",
                          "torch-cpu", "--partial", "--build-on", "hf-jobs:cpu-upgrade", "--job-timeout", "15m"],
                         capture_output=True, text=True, env=env, timeout=900)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-6000:]
    new = [j for j in build_jobs() if j.id not in seen]
    assert [(j.labels or {}).get("publisher-variant") for j in new] == ["torch-cpu"], new
    report = json.loads((project / "build" / ".publisher" / "build-report.json").read_text())["variants"]
    assert report["torch-cpu"]["state"] == "built-remote", report["torch-cpu"]
    tested = json.loads((project / "build" / ".publisher" / "test-report.json").read_text())["variants"]["torch-cpu"]
    assert tested["status"] == "passed" and tested["tests"]["passed"] > 0
    files = api.list_repo_files("publisher-dev/softcap", repo_type="kernel", revision="v1")
    assert "build/torch-cpu/metadata.json" in files
    assert token not in log

    shutil.rmtree(project / "build")
    out = subprocess.run([str(PUBLISHER), "build", str(project), "--on", "hf-jobs:cpu-upgrade", "--variant", "torch-cpu",
                          "--repo", "publisher-dev/softcap", "--json"], capture_output=True, text=True, env=env,
                         timeout=300)
    [entry] = json.loads(out.stdout)["variants"]
    assert entry["state"] == "fetched" and out.returncode == 0, out.stderr[-3000:]
    assert len(build_jobs()) == len(seen) + 1  # the Hub held it: no job
    from publisher.builder.metadata import check_variant
    assert check_variant(project / "build" / "torch-cpu").ok

    # --one-job-per image: softcap's two variants share their build image, so one job builds both
    shutil.rmtree(project / "build")
    seen = {j.id for j in build_jobs()}
    out = subprocess.run([str(PUBLISHER), "build", str(project), "--on", "hf-jobs:cpu-upgrade", "--one-job-per", "image",
                          "--no-hub-cache", "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert {v["variant"]: v["state"] for v in json.loads(out.stdout)["variants"]} == {
        "torch-cpu": "built-remote", "torch-cuda": "built-remote"} and out.returncode == 0, out.stderr[-3000:]
    assert len([j for j in build_jobs() if j.id not in seen]) == 1, out.stderr[-3000:]
    assert "2 variant(s) in 1 job(s)" in out.stderr
    assert check_variant(project / "build" / "torch-cpu").ok and check_variant(project / "build" / "torch-cuda").ok


def _build_rehearsal(tmp_path: Path, url: str, token: str, extra: list[str]) -> None:
    """softcap's two variants built as two parallel jobs, one of them lost (cancelled as soon as it
    exists, as a preempted job ends), then --only-failed rebuilding that one alone."""
    import shutil
    import threading

    project = tmp_path / "softcap"
    shutil.copytree(REPO / "kernel_projects" / "softcap", project, ignore=shutil.ignore_patterns("build"))
    env = dict(os.environ, HF_ENDPOINT=url, HF_TOKEN=token, HF_HUB_DISABLE_XET="1")
    api = HfApi(endpoint=url, token=token)

    def jobs_of(variant: str) -> list:
        return [j for j in api.list_jobs(namespace="publisher-dev")
                if (j.labels or {}).get("publisher-variant") == variant and (j.labels or {}).get("publisher") == "build"]

    stop = threading.Event()

    def cancel_cuda_job():
        while not stop.is_set():
            for job in jobs_of("torch-cuda"):
                if job.status.stage in ("SCHEDULING", "RUNNING"):
                    api.cancel_job(job_id=job.id, namespace="publisher-dev")
                    return
            time.sleep(0.2)

    canceller = threading.Thread(target=cancel_cuda_job, daemon=True)
    canceller.start()
    out = subprocess.run([str(PUBLISHER), "build", str(project), "--on", "hf-jobs:cpu-upgrade", "--max-parallel", "2",
                          "--json", *extra], capture_output=True, text=True, env=env, timeout=900)
    stop.set()
    log = out.stdout + out.stderr
    states = {v["variant"]: v["state"] for v in json.loads(out.stdout)["variants"]}
    assert states == {"torch-cpu": "built-remote", "torch-cuda": "cancelled"} and out.returncode == 1, log[-4000:]
    # what came back is the variant the job built, checked file by file, where a local build puts it
    from publisher.builder.metadata import check_variant
    assert check_variant(project / "build" / "torch-cpu").ok and not (project / "build" / "torch-cuda").exists()
    assert len(jobs_of("torch-cpu")) == 1 and len(jobs_of("torch-cuda")) == 1
    assert token not in log

    out = subprocess.run([str(PUBLISHER), "build", str(project), "--on", "hf-jobs:cpu-upgrade", "--only-failed",
                          "--json", *extra], capture_output=True, text=True, env=env, timeout=900)
    states = {v["variant"]: v["state"] for v in json.loads(out.stdout)["variants"]}
    assert states == {"torch-cuda": "built-remote"} and out.returncode == 0, out.stderr[-4000:]
    assert len(jobs_of("torch-cpu")) == 1 and len(jobs_of("torch-cuda")) == 2  # only the failed one again
    for job in api.list_jobs(namespace="publisher-dev"):  # the token reached the build jobs as a secret only
        assert token not in json.dumps(job.environment or {}) + json.dumps(job.secrets or {}, default=str)
        assert token not in "\n".join(api.fetch_job_logs(job_id=job.id, namespace="publisher-dev"))
    staged = api.list_repo_files("publisher-dev/publisher-staging", repo_type="model")
    assert not [f for f in staged if f.startswith("runs/")], staged
    tested = subprocess.run([str(PUBLISHER), "test", str(project), "--variant", "torch-cpu"], capture_output=True,
                            text=True, env=env, timeout=600)
    assert tested.returncode == 0, tested.stderr[-3000:]
