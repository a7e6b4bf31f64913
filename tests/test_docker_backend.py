"""The Docker backend against a real engine (.ci/setup-docker.sh starts one
and imports the base image): the rmsnorm CPU variant built in a container
loads through the real `kernels` client and computes RMSNorm; a second build
reuses the toolchain and compiler caches kept in named volumes; failures and
Ctrl-C leave no container behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from publisher.backends.docker import LABEL, DockerBackend, work_volume
from publisher.backends.docker_settings import CA_IN_CONTAINER, host_index_settings
from publisher.plan.variants import Variant

from build_fixtures import write_tiny_project
from cli_helper import CliResult, run_cli
from matrix_fixtures import local_variant_name, write_local_matrix

REPO = Path(__file__).resolve().parents[1]
RMSNORM = REPO / "kernel_projects" / "rmsnorm"
LOCAL_MATRIX = write_local_matrix(Path(tempfile.mkdtemp(prefix="publisher-matrix-")) / "local.yaml")
BASE_IMAGE = os.environ.get("PUBLISHER_DOCKER_BASE_IMAGE", "publisher-base:bookworm")
LOCAL_VARIANT = local_variant_name()  # the running torch, whichever it is, built again in a container


def _engine_problem() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as err:  # the SDK missing or no engine: say which
        return f"no Docker engine reachable ({type(err).__name__}); CI starts one with .ci/setup-docker.sh"
    try:
        client.images.get(BASE_IMAGE)
    except Exception:
        return f"base image {BASE_IMAGE} missing; .ci/setup-docker.sh creates it (debootstrap + docker import)"
    return None


needs_engine = pytest.mark.skipif(_engine_problem() is not None, reason=str(_engine_problem()))


def _publisher(*args: str) -> CliResult:
    return run_cli(*args, env=dict(os.environ, PUBLISHER_DOCKER_BASE_IMAGE=BASE_IMAGE))


def _cuda_here() -> bool:
    import torch

    return torch.cuda.is_available()


def _our_containers(project: Path) -> list[str]:
    """Builder containers of `project`: other builds may share the engine (another checkout's tests)."""
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={LABEL}=builder",
                          "--filter", f"label={LABEL}.project={project.resolve()}"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def _states(result: CliResult) -> dict[str, dict]:
    assert result.returncode in (0, 1), result.stderr
    return {v["variant"]: v for v in json.loads(result.stdout)["variants"]}


def _drop_work_volumes(project: Path) -> None:
    import docker

    for volume in docker.from_env().volumes.list(filters={"name": work_volume(project.resolve(), "")}):
        volume.remove(force=True)


@pytest.mark.docker
@pytest.mark.slow
@needs_engine
def test_rmsnorm_cpu_builds_in_a_container_loads_and_a_second_build_reuses_the_caches(tmp_path):
    first = _states(_publisher("build", str(RMSNORM), "--backend", "docker", "--matrix", str(LOCAL_MATRIX), "--variant", LOCAL_VARIANT,
                               "--out", str(tmp_path / "first"), "--json"))
    entry = first[LOCAL_VARIANT]
    assert entry["state"] == "built", entry["error"]
    assert entry["backend"] == "docker"
    assert entry["abi"]["ok"], entry["abi"]
    variant = tmp_path / "first" / LOCAL_VARIANT
    assert all(p.stat().st_uid == os.getuid() for p in variant.iterdir())
    assert _our_containers(RMSNORM) == []

    # The real client loads it, and the op computes RMSNorm (fp64 reference) on the variant's
    # device; a CUDA variant on a machine without a GPU (a CUDA torch here) can only be loaded.
    device = "cpu" if Variant.parse(LOCAL_VARIANT).compute == "cpu" else "cuda"
    check = (
        "import torch; from pathlib import Path; from kernels import get_local_kernel\n"
        f"k = get_local_kernel(Path({str(tmp_path / 'first')!r}))\n"
        f"device = {device!r}\n"
        "if device == 'cuda' and not torch.cuda.is_available():\n"
        "    print('loaded' if callable(k.rms_norm) else 'no op'); raise SystemExit\n"
        "x = torch.randn(7, 37, device=device); w = torch.randn(37, device=device)\n"
        "ref = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()).float()\n"
        "torch.testing.assert_close(k.rms_norm(x, w, 1e-6), ref, rtol=1e-5, atol=1e-5)\nprint('ok')\n"
    )
    loaded = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300)
    expected = "loaded" if device == "cuda" and not _cuda_here() else "ok"
    assert loaded.stdout.strip() == expected, loaded.stderr

    # A second build into a fresh folder (a CI job with a clean checkout):
    # nothing is downloaded or compiled again, the volumes have it all.
    second = _states(_publisher("build", str(RMSNORM), "--backend", "docker", "--matrix", str(LOCAL_MATRIX), "--variant", LOCAL_VARIANT,
                                "--out", str(tmp_path / "second"), "--json"))
    assert second[LOCAL_VARIANT]["state"] == "built", second[LOCAL_VARIANT]["error"]
    log = Path(second[LOCAL_VARIANT]["log"]).read_text()
    assert "creating toolchain" not in log and "Downloading" not in log and "Installed" not in log
    assert f"{LOCAL_VARIANT}: cached" in log  # the inner build found its cached result
    # no compiler ran, and the first build's log (which has the compiler lines) is not passed off as this one's
    assert "g++" not in log and "--- build log inside the container ---" not in log
    assert (tmp_path / "second" / LOCAL_VARIANT / "metadata.json").read_bytes() == (variant / "metadata.json").read_bytes()
    assert _our_containers(RMSNORM) == []


@pytest.mark.docker
@pytest.mark.slow
@needs_engine
def test_a_failing_build_reports_the_compiler_error_and_leaves_no_container(tmp_path):
    project = write_tiny_project(tmp_path / "tiny-broken")
    # break a C++ file the running torch's variant compiles (the CPU kernel, or the CUDA launcher)
    cpu = Variant.parse(LOCAL_VARIANT).compute == "cpu"
    scale = project / ("scale_cpu/scale.cpp" if cpu else "scale_cuda/launch.cpp")
    scale.write_text(scale.read_text() + "\nthis is not C++;\n")
    try:
        result = _publisher("build", str(project), "--backend", "docker", "--matrix", str(LOCAL_MATRIX), "--variant", LOCAL_VARIANT, "--json")
        entry = _states(result)[LOCAL_VARIANT]
        assert result.returncode == 1
        assert entry["state"] == "failed" and scale.name in entry["error"] and "error" in entry["error"]
        assert "this is not C++" in Path(entry["log"]).read_text()  # the compiler output, from inside
        assert not (project / "build" / LOCAL_VARIANT).exists()
        assert _our_containers(project) == []
    finally:
        _drop_work_volumes(project)


@pytest.mark.docker
@pytest.mark.slow
@needs_engine
def test_ctrl_c_stops_the_build_and_removes_the_container(tmp_path):
    project = write_tiny_project(tmp_path / "tiny-interrupted")
    env = dict(os.environ, PUBLISHER_DOCKER_BASE_IMAGE=BASE_IMAGE)
    proc = subprocess.Popen([sys.executable, "-m", "publisher", "build", str(project), "--backend", "docker",
                             "--matrix", str(LOCAL_MATRIX), "--variant", LOCAL_VARIANT], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + 900
        while not _our_containers(project):
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "no build container started"
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, out
        assert _our_containers(project) == []
        assert not (project / "build" / LOCAL_VARIANT).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        _drop_work_volumes(project)


@pytest.mark.docker
@pytest.mark.slow
@needs_engine
def test_outputs_belong_to_the_requested_user_not_the_container(tmp_path):
    from publisher.builder.backend import BuildOptions, BuildRequest
    from publisher.plan.matrix import load_matrix
    from publisher.plan.planner import make_plan, select
    from publisher.project.load import require_project

    if os.getuid() != 0:
        pytest.skip("changing ownership to another user needs root")
    project_dir = write_tiny_project(tmp_path / "tiny-owned")
    project = require_project(project_dir)
    planned = select(make_plan(project, load_matrix(LOCAL_MATRIX)), [LOCAL_VARIANT])[0]
    stage = tmp_path / "stage"
    stage.mkdir()
    backend = DockerBackend(base_image=BASE_IMAGE, owner=(1234, 1234), matrix_file=LOCAL_MATRIX)
    try:
        backend.check_environment()
        backend.build(BuildRequest(project, planned, stage, tmp_path / "log", tmp_path / "work", BuildOptions(cores=2)),
                      lambda line: None)
    finally:
        backend.close()
        _drop_work_volumes(project_dir)
    files = list(stage.rglob("*"))
    assert {p.name for p in files} >= {"metadata.json", "_ops.py", "__init__.py"}
    assert {(p.stat().st_uid, p.stat().st_gid) for p in files} == {(1234, 1234)}
    assert _our_containers(project_dir) == []


def test_no_engine_says_what_to_start_and_names_docker_host(tmp_path):
    project = write_tiny_project(tmp_path / "tiny")
    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    result = run_cli("build", project, "--backend", "docker", "--matrix", LOCAL_MATRIX, "--variant", LOCAL_VARIANT, env=env)
    assert result.returncode == 3, result.stderr
    assert f"no Docker engine answers at unix://{tmp_path}/no-engine.sock" in result.stderr
    assert "DOCKER_HOST" in result.stderr and "dockerd" in result.stderr
    assert "Traceback" not in result.stderr


def test_index_settings_pass_the_ca_bundle_and_mount_only_local_indexes_that_exist(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (tmp_path / "mirror" / "simple").mkdir(parents=True)
    ca = tmp_path / "corp-ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("PIP_FIND_LINKS", f"{wheels} {tmp_path}/missing-wheels https://example.org/links")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", f"file://{tmp_path}/mirror/simple file:///nowhere/simple")
    settings = host_index_settings(ca_bundle=ca, index_url="https://pypi.corp.example/simple")

    env = settings.environment()
    assert env["SSL_CERT_FILE"] == env["PIP_CERT"] == CA_IN_CONTAINER
    assert env["PIP_INDEX_URL"] == env["UV_INDEX_URL"] == "https://pypi.corp.example/simple"
    assert env["PIP_FIND_LINKS"] == f"{wheels} https://example.org/links"
    assert env["PIP_EXTRA_INDEX_URL"] == f"file://{tmp_path}/mirror/simple"
    mounts = settings.mounts()
    assert mounts[str(ca)] == {"bind": CA_IN_CONTAINER, "mode": "ro"}
    assert mounts[str(wheels)] == {"bind": str(wheels), "mode": "ro"}
    assert mounts[str(tmp_path / "mirror")]["mode"] == "ro"  # the index and the files its pages link to
    assert len(mounts) == 3
    assert any("missing-wheels" in n for n in settings.notes) and any("/nowhere" in n for n in settings.notes)
    assert settings.build_args() == {"PIP_INDEX_URL": "https://pypi.corp.example/simple"}


@pytest.mark.docker
@pytest.mark.slow
@needs_engine
def test_no_hub_cache_means_no_hub_lookup_outside_or_inside_the_container(hub_env, tmp_path):
    project = write_tiny_project(tmp_path / "tiny", git=True)
    env = dict(hub_env.env(), PUBLISHER_DOCKER_BASE_IMAGE=BASE_IMAGE)
    result = run_cli("build", project, "--backend", "docker", "--matrix", LOCAL_MATRIX, "--variant", LOCAL_VARIANT,
                     "--repo", "someorg/tiny", "--no-hub-cache", "--json", env=env)
    entry = _states(result)[LOCAL_VARIANT]
    assert entry["state"] == "built", entry["error"]
    assert hub_env.state.requests == {}  # the driver asked our Hub nothing
    # the container has no Hub to ask: a lookup in it would leave a "hub cache" note in the inner log
    log = Path(entry["log"]).read_text()
    assert "--- build log inside the container ---" in log and "hub cache" not in log
    assert "hub cache" not in result.stderr
    assert _our_containers(project) == []
