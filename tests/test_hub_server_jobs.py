"""The Hub-compatible server's Jobs API, driven by the real huggingface_hub client
(HfApi.run_job, wait_for_job, fetch_job_logs, ...) and the `hf jobs` CLI.

Jobs here run with the process executor (quick); the Docker executor's tests are
slow and need the local engine and the registry-free image publisher-base:bookworm."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx2 as httpx  # huggingface_hub's own HTTP client
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, Volume
from huggingface_hub.errors import BadRequestError, HfHubHTTPError, JobNotFoundError

from publisher.hub_server.server import HubServer, ServerConfig

IMAGE = "python:3.12"  # recorded by the process executor, not used
USER = "publisher-dev"


def _run(api: HfApi, script: str, **kw):
    kw.setdefault("namespace", USER)
    return api.run_job(image=kw.pop("image", IMAGE), command=["sh", "-c", script], **kw)


def _wait(api: HfApi, job, timeout: float = 60):
    return api.wait_for_job(job.id, namespace=job.owner.name, timeout=timeout, poll_interval=0.2)


def _logs(api: HfApi, job, **kw) -> list[str]:
    return list(api.fetch_job_logs(job_id=job.id, namespace=job.owner.name, **kw))


def _raw(hub, path: str, token: str | None = None) -> httpx.Response:
    return httpx.get(f"{hub.url}{path}", headers={"Authorization": f"Bearer {token or hub.write_token}"})


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _pids(path: Path, count: int, within: float = 20.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            lines = path.read_text().split()
            if len(lines) >= count:
                return [int(x) for x in lines[:count]]
        time.sleep(0.1)
    raise AssertionError(f"the job never wrote {count} pid(s) to {path}")


# -- running, logs, outcomes ---------------------------------------------------
def test_a_job_runs_and_its_log_streams_while_it_runs(jobs_hub):
    api = jobs_hub.api()
    job = _run(api, "echo one; echo to-stderr >&2; sleep 1.5; echo two", labels={"suite": "stream"})
    assert job.status.stage in ("SCHEDULING", "RUNNING") and job.owner.name == USER
    stage_at_first_line = None
    lines = []
    for line in api.fetch_job_logs(job_id=job.id, namespace=USER, follow=True):
        if line == "one":
            stage_at_first_line = api.inspect_job(job_id=job.id, namespace=USER).status.stage
        lines.append(line)
    assert stage_at_first_line == "RUNNING"  # streamed, not handed over at the end
    assert [x for x in lines if not x.startswith("[hub-server]")] == ["one", "to-stderr", "two"]
    done = _wait(api, job)
    assert done.status.stage == "COMPLETED" and done.status.message is None
    assert done.created_at <= done.started_at <= done.finished_at
    assert done.durations.running_secs >= 1 and done.durations.total_secs >= done.durations.running_secs
    assert done.flavor == "cpu-basic" and done.docker_image == IMAGE
    assert done.command == ["sh", "-c", "echo one; echo to-stderr >&2; sleep 1.5; echo two"]
    assert done.labels["suite"] == "stream" and done.labels["name"]  # run_job adds the name label
    assert done.initiator.type == "user" and done.initiator.name == USER
    # the finished job's log is replayed whole, or its tail
    assert _logs(api, job) == lines
    assert _logs(api, job, tail=2) == ["to-stderr", "two"]


def test_a_failing_command_ends_in_error_with_its_exit_code(jobs_hub):
    api = jobs_hub.api()
    done = _wait(api, _run(api, "echo about to fail; exit 3"))
    assert done.status.stage == "ERROR"
    assert done.status.message == "Job failed with exit code: 3"


def test_attempts_retry_a_failed_command(jobs_hub, tmp_path):
    api = jobs_hub.api()
    marker = tmp_path / "tried"
    job = _run(api, f"if [ -e {marker} ]; then echo second try; else touch {marker}; echo first try; exit 1; fi",
               attempts=2)
    assert _wait(api, job).status.stage == "COMPLETED"
    lines = _logs(api, job)
    assert "first try" in lines and "second try" in lines
    assert any("attempt 1 of 2 failed with exit code 1" in x for x in lines)
    raw = _raw(jobs_hub, f"/api/jobs/{USER}/{job.id}").json()
    assert raw["status"]["failureCount"] == 1 and raw["retry"] == 1


def test_a_job_past_its_timeout_is_stopped_and_ends_in_error(jobs_hub, tmp_path):
    api = jobs_hub.api()
    pidfile = tmp_path / "pid"
    job = _run(api, f"sleep 120 & echo $! > {pidfile}; wait", timeout=2)
    (pid,) = _pids(pidfile, 1)
    done = _wait(api, job)
    assert done.status.stage == "ERROR"
    assert "timed out" in done.status.message and "2 seconds" in done.status.message
    assert _gone(pid)


def test_cancel_kills_the_whole_tree_even_a_detached_child(jobs_hub, tmp_path):
    api = jobs_hub.api()
    pidfile = tmp_path / "pids"
    job = _run(api, f"sleep 300 & echo $! >> {pidfile}; setsid sleep 300 & echo $! >> {pidfile}; wait")
    pids = _pids(pidfile, 2)
    api.cancel_job(job_id=job.id, namespace=USER)
    assert api.inspect_job(job_id=job.id, namespace=USER).status.stage == "CANCELED"
    assert all(_gone(pid) for pid in pids)
    api.cancel_job(job_id=job.id, namespace=USER)  # cancelling an ended job changes nothing
    assert api.inspect_job(job_id=job.id, namespace=USER).status.stage == "CANCELED"


def test_rerun_duplicates_the_job_secrets_included(jobs_hub):
    api = jobs_hub.api()
    secret = uuid.uuid4().hex
    first = _run(api, 'printf %s "$MY_SECRET" | sha256sum', secrets={"MY_SECRET": secret})
    _wait(api, first)
    again = api.rerun_job(job_id=first.id, namespace=USER)
    assert again.id != first.id and again.command == first.command
    assert again.initiator.type == "duplicated-job" and again.initiator.id == first.id
    assert _wait(api, again).status.stage == "COMPLETED"
    digest = hashlib.sha256(secret.encode()).hexdigest()
    assert any(line.startswith(digest) for line in _logs(api, first))
    assert any(line.startswith(digest) for line in _logs(api, again))


def test_metrics_stream_while_running_and_stop_after(jobs_hub):
    api = jobs_hub.api()
    job = _run(api, "sleep 4")
    api.wait_for_job(job.id, namespace=USER, stages=["RUNNING"], poll_interval=0.2)
    sample = next(iter(api.fetch_job_metrics(job_id=job.id, namespace=USER)))
    assert sample["cpu_millicores"] > 0 and sample["memory_total_bytes"] > 0
    assert {"cpu_usage_pct", "memory_used_bytes", "rx_bps", "tx_bps", "gpus"} <= set(sample)
    api.cancel_job(job_id=job.id, namespace=USER)
    assert list(api.fetch_job_metrics(job_id=job.id, namespace=USER)) == []  # 406 once it has ended


def test_a_missing_job_is_job_not_found(jobs_hub):
    with pytest.raises(JobNotFoundError):
        jobs_hub.api().inspect_job(job_id="0" * 24, namespace=USER)


# -- auth and refusals ---------------------------------------------------------
def test_a_token_without_job_write_is_refused_as_the_hub_refuses_it(jobs_hub):
    for token in (jobs_hub.no_jobs_token, jobs_hub.read_token):
        with pytest.raises(HfHubHTTPError) as err:
            _run(jobs_hub.api(token), "echo never")
        assert err.value.response.status_code == 403
        assert "missing permissions: job.write" in str(err.value)
    job = _run(jobs_hub.api(), "sleep 30")
    with pytest.raises(HfHubHTTPError) as err:
        jobs_hub.api(jobs_hub.no_jobs_token).cancel_job(job_id=job.id, namespace=USER)
    assert err.value.response.status_code == 403
    jobs_hub.api().cancel_job(job_id=job.id, namespace=USER)
    # the same token still writes to repositories, and says what it is
    no_jobs = jobs_hub.api(jobs_hub.no_jobs_token)
    no_jobs.create_repo(f"{USER}/no-jobs-{uuid.uuid4().hex[:6]}", repo_type="model")
    access = no_jobs.whoami()["auth"]["accessToken"]
    assert access["role"] == "fineGrained"
    assert "job.write" not in json.dumps(access["fineGrained"])


def test_no_token_is_401_and_a_stranger_namespace_403(jobs_hub):
    with pytest.raises(HfHubHTTPError) as err:
        _run(HfApi(endpoint=jobs_hub.url, token=False), "echo never")
    assert err.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError) as err:
        _run(jobs_hub.api(), "echo never", namespace="somebody-else")
    assert err.value.response.status_code == 403
    org_job = _wait(jobs_hub.api(), _run(jobs_hub.api(), "true", namespace=jobs_hub.org))
    assert org_job.status.stage == "COMPLETED" and org_job.owner.type == "org" and org_job.owner.name == jobs_hub.org


def test_an_unknown_flavor_is_refused_naming_the_valid_ones(jobs_hub):
    with pytest.raises(BadRequestError) as err:
        _run(jobs_hub.api(), "echo never", flavor="h100x9")
    assert err.value.response.status_code == 400
    assert "h100x9" in str(err.value) and "cpu-basic" in str(err.value) and "h200" in str(err.value)


def test_unsupported_volumes_are_refused_clearly(jobs_hub):
    api = jobs_hub.api()
    for volume, expected in [
        (Volume(type="bucket", source=f"{USER}/jobs-artifacts", mount_path="/in"), "no storage buckets"),
        (Volume(type="kernel", source=f"{USER}/k", mount_path="/k"), "invalid volume type 'kernel'"),
        (Volume(type="model", source=f"{USER}/does-not-exist", mount_path="/m"), "repository not found"),
    ]:
        with pytest.raises(BadRequestError) as err:
            _run(api, "true", volumes=[volume])
        assert expected in str(err.value)


@pytest.mark.parametrize(("body", "named"), [
    ({"dockerImage": IMAGE, "command": ["true"]}, "flavor"),
    ({"flavor": ["cpu-basic"], "dockerImage": IMAGE, "command": ["true"]}, "flavor"),
    ({"flavor": "cpu-basic", "command": ["true"]}, "dockerImage or spaceId"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": []}, "command"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true", 3]}, "command"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true"], "environment": {"A": "x"}}, "environment"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true"], "environment": {"AB": 1}}, "environment.AB"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true"], "timeoutSeconds": 0}, "timeoutSeconds"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true"], "attempts": "2"}, "attempts"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true"], "labels": {"a b": "c"}}, "labels"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true"], "volumes": [{"type": "model"}]}, "volumes[0]"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true"], "ssh": {"enabled": True}}, "ssh"),
    ({"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true"], "arch": "riscv"}, "arch"),
    ([{"flavor": "cpu-basic"}], "JSON object"),
])
def test_a_bad_job_spec_is_a_400_naming_the_field(jobs_hub, body, named):
    r = httpx.post(f"{jobs_hub.url}/api/jobs/{USER}", json=body,
                   headers={"Authorization": f"Bearer {jobs_hub.write_token}"})
    assert r.status_code == 400 and named in r.json()["error"]


def test_a_wrong_secret_is_refused_without_quoting_its_value(jobs_hub):
    value = 12345678987654321
    r = httpx.post(f"{jobs_hub.url}/api/jobs/{USER}", headers={"Authorization": f"Bearer {jobs_hub.write_token}"},
                   json={"flavor": "cpu-basic", "dockerImage": IMAGE, "command": ["true"], "secrets": {"TOKEN": value}})
    assert r.status_code == 400 and "secrets.TOKEN" in r.text and str(value) not in r.text


# -- listing, labels, hardware ---------------------------------------------------
def test_list_jobs_filters_by_label_and_stage_across_pages(jobs_hub):
    api = jobs_hub.api()
    suite = f"s{uuid.uuid4().hex[:8]}"
    jobs = [_run(api, f"exit {code}", labels={"suite": suite}) for code in (0, 0, 5)]
    for job in jobs:
        _wait(api, job)
    listed = list(api.list_jobs(namespace=USER, labels={"suite": suite}))  # two a page: the client follows Link
    assert [j.id for j in listed] == [j.id for j in reversed(jobs)]  # newest first
    failed = list(api.list_jobs(namespace=USER, labels={"suite": suite}, status="ERROR"))
    assert [j.id for j in failed] == [jobs[2].id]
    both = list(api.list_jobs(namespace=USER, labels={"suite": suite}, status=["ERROR", "COMPLETED"]))
    assert len(both) == 3
    relabelled = api.update_job_labels(job_id=jobs[0].id, namespace=USER, labels={"suite": suite, "keep": "yes"})
    assert relabelled.labels == {"suite": suite, "keep": "yes"}
    assert [j.id for j in api.list_jobs(namespace=USER, labels={"keep": "yes", "suite": suite})] == [jobs[0].id]


def test_hardware_lists_the_hubs_flavours_and_prices(jobs_hub):
    hardware = {h.name: h for h in jobs_hub.api().list_jobs_hardware()}
    assert {"cpu-basic", "cpu-upgrade", "t4-small", "l4x1", "a100-large", "h200", "h200x8", "rtx-pro-6000"} <= set(hardware)
    basic, t4, h200 = hardware["cpu-basic"], hardware["t4-small"], hardware["h200"]
    assert basic.accelerator is None and basic.cpu == "2 vCPU" and basic.ram == "16 GB"
    assert (basic.unit_cost_micro_usd, basic.unit_cost_usd, basic.unit_label) == (167, 0.000167, "minute")
    assert t4.unit_cost_micro_usd == 6667 and t4.accelerator.model == "T4"
    assert (h200.accelerator.model, h200.accelerator.quantity, h200.accelerator.vram) == ("H200", "1", "141 GB")
    assert h200.accelerator.manufacturer == "Nvidia" and h200.unit_cost_usd * 60 == pytest.approx(5.0, abs=0.001)


# -- volumes and secrets ----------------------------------------------------------
def _private_model(api: HfApi, text: str) -> str:
    repo = f"{USER}/weights-{uuid.uuid4().hex[:8]}"
    api.create_repo(repo, private=True)
    api.create_commit(repo, [CommitOperationAdd("weights/msg.txt", (text + "\n").encode()),
                             CommitOperationAdd("README.md", b"not mounted\n")], commit_message="weights")
    return repo


def test_private_repo_volumes_are_read_only_and_private_to_each_job(jobs_hub):
    api = jobs_hub.api()
    mount = f"/mnt/publisher-jobs-test-{uuid.uuid4().hex[:8]}"  # missing on this machine: made, then removed
    script = (f"sleep 1; cat {mount}/msg.txt; ls {mount}; "
              f"if touch {mount}/new 2>/dev/null; then echo WRITABLE; exit 1; else echo not writable; fi")
    jobs = []
    for text in ("from repo A", "from repo B"):  # the same mount path, at the same time
        volume = Volume(type="model", source=_private_model(api, text), mount_path=mount, path="weights")
        jobs.append((text, _run(api, script, volumes=[volume])))
    for text, job in jobs:
        assert _wait(api, job).status.stage == "COMPLETED"
        lines = [x for x in _logs(api, job) if not x.startswith("[hub-server]")]
        assert lines == [text, "msg.txt", "not writable"]
        volume = api.inspect_job(job_id=job.id, namespace=USER).volumes[0]
        assert (volume.type, volume.mount_path, volume.read_only, volume.path) == ("model", mount, True, "weights")
    assert not Path(mount).exists()


def test_secrets_reach_the_job_but_never_an_answer_the_disk_or_the_server_log(jobs_hub, monkeypatch, capfd):
    monkeypatch.setenv("PUBLISHER_HUB_LOG", "1")
    api = jobs_hub.api()
    secret = "hf_" + uuid.uuid4().hex
    job = _run(api, 'printf %s "$HF_TOKEN" | sha256sum; echo "$PLAIN"', secrets={"HF_TOKEN": secret},
               env={"PLAIN": "visible"}, labels={"suite": "secrets"})
    assert job.secrets == ["HF_TOKEN"] and job.environment == {"PLAIN": "visible"}
    _wait(api, job)
    lines = _logs(api, job)
    assert lines[-2].startswith(hashlib.sha256(secret.encode()).hexdigest()) and lines[-1] == "visible"
    answers = [_raw(jobs_hub, f"/api/jobs/{USER}/{job.id}").text,
               _raw(jobs_hub, f"/api/jobs/{USER}?label=suite=secrets").text]
    assert all(secret not in text for text in answers) and all("HF_TOKEN" in text for text in answers)
    on_disk = [p.read_text(errors="replace") for p in jobs_hub.data_dir.joinpath("jobs").rglob("*") if p.is_file()]
    assert on_disk and all(secret not in text for text in on_disk)
    logged = capfd.readouterr().err
    assert f"/api/jobs/{USER}" in logged and secret not in logged


def test_the_job_environment_names_the_job_and_reaches_this_server(jobs_hub, monkeypatch, tmp_path):
    # this machine is logged in to the Hub, in the environment and in the login file
    monkeypatch.setenv("HF_TOKEN", "hf_" + "h" * 34)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    (tmp_path / "token").write_text("hf_" + "l" * 34)
    api = jobs_hub.api()
    probe = "from huggingface_hub import get_token; print('login:', get_token())"
    job = _run(api, 'echo "$JOB_ID $ACCELERATOR $CPU_CORES $MEMORY"; echo "$HF_ENDPOINT"; '
                    f'echo "token:${{HF_TOKEN:-none}}"; {sys.executable} -c "{probe}"', flavor="t4-small")
    _wait(api, job)
    lines = [x for x in _logs(api, job) if not x.startswith("[hub-server]")]
    job_id, accelerator, cores, memory = lines[0].split()
    assert (job_id, accelerator) == (job.id, "t4-small") and int(cores) >= 1 and memory.endswith("Gi")
    # no token of the machine's leaks in: a job gets HF_TOKEN only as a secret
    assert lines[1:] == [jobs_hub.url, "token:none", "login: None"]


# -- the server's own life ------------------------------------------------------
def test_closing_the_server_stops_its_jobs_and_a_restart_keeps_their_record(tmp_path):
    token = "hf_" + "j" * 34
    config = ServerConfig(tokens={token: "write"}, jobs_executor="process")
    first = HubServer(tmp_path / "data", config).start()
    api = HfApi(endpoint=first.url, token=token)
    pidfile = tmp_path / "pid"
    job = _run(api, f"echo started; sleep 300 & echo $! > {pidfile}; wait")
    (pid,) = _pids(pidfile, 1)
    first.close()
    assert _gone(pid)
    second = HubServer(tmp_path / "data", config).start()
    try:
        api = HfApi(endpoint=second.url, token=token)
        again = api.inspect_job(job_id=job.id, namespace=USER)
        assert again.status.stage == "ERROR" and "shut down" in again.status.message
        assert "started" in _logs(api, again)
    finally:
        second.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_stopping_the_hub_server_command_stops_its_jobs(tmp_path, signum):
    """Ctrl-C (or `kill`) of `publisher hub-server`: its running jobs are killed, and it says so."""
    token = "hf_" + "c" * 34
    argv = [sys.executable, "-m", "publisher", "hub-server", "--port", "0", "--data-dir", str(tmp_path / "hub"),
            "--token", token, "--jobs-executor", "process"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        banner = [proc.stderr.readline() for _ in range(5)]
        url = re.match(r"Hub-compatible server on (http://127\.0\.0\.1:\d+) ", banner[0]).group(1)
        assert "jobs run with the process executor" in banner[3] and "hf jobs run" in banner[4]
        pidfile = tmp_path / "pid"
        _run(HfApi(endpoint=url, token=token), f"sleep 300 & echo $! > {pidfile}; wait")
        (pid,) = _pids(pidfile, 1)
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == 0
        assert "stopped 1 running job(s)" in proc.stderr.read()
        assert _gone(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_relative_data_dir_still_mounts_volumes_in_jobs(tmp_path):
    """`publisher hub-server --data-dir hub` from the folder it is in: a job's repo volume is found (the
    process executor runs jobs in folders of their own, where a relative path means something else)."""
    token = "hf_" + "r" * 34
    argv = [sys.executable, "-m", "publisher", "hub-server", "--port", "0", "--data-dir", "hub", "--token", token,
            "--jobs-executor", "process"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=tmp_path)
    try:
        url = re.match(r"Hub-compatible server on (http://127\.0\.0\.1:\d+) ", proc.stderr.readline()).group(1)
        api = HfApi(endpoint=url, token=token)
        mount = f"/mnt/publisher-jobs-test-{uuid.uuid4().hex[:8]}"
        volume = Volume(type="model", source=_private_model(api, "relative"), mount_path=mount, path="weights")
        job = _run(api, f"cat {mount}/msg.txt", volumes=[volume])
        assert _wait(api, job).status.stage == "COMPLETED", _logs(api, job)
        assert [x for x in _logs(api, job) if not x.startswith("[hub-server]")] == ["relative"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_the_hf_jobs_cli_runs_against_the_server(jobs_hub, tmp_path):
    hf = Path(sys.executable).with_name("hf")
    env = {**os.environ, "HF_ENDPOINT": jobs_hub.url, "HF_TOKEN": jobs_hub.write_token, "HF_HOME": str(tmp_path),
           "HF_HUB_DISABLE_XET": "1", "NO_COLOR": "1"}
    env.pop("HF_HUB_DISABLE_TELEMETRY", None)
    ran = subprocess.run([str(hf), "jobs", "run", IMAGE, "--", "sh", "-c", "echo hello from the cli"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "hello from the cli" in ran.stdout
    failed = subprocess.run([str(hf), "jobs", "run", IMAGE, "--", "sh", "-c", "exit 7"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode != 0 and "Job failed with exit code: 7" in failed.stdout + failed.stderr
    hardware = subprocess.run([str(hf), "jobs", "hardware"], env=env, capture_output=True, text=True, timeout=60)
    assert hardware.returncode == 0 and "h200" in hardware.stdout and "Nvidia H200" in hardware.stdout


# -- the Docker executor ------------------------------------------------------------
DOCKER_IMAGE = "publisher-base:bookworm"  # made by .ci/setup-docker.sh, no registry needed


@pytest.fixture(scope="module")
def docker_hub(tmp_path_factory):
    if shutil.which("docker") is None or subprocess.run(["docker", "image", "inspect", DOCKER_IMAGE],
                                                        capture_output=True).returncode != 0:
        pytest.fail(f"the Docker executor tests need a running engine with {DOCKER_IMAGE} (bash .ci/setup-docker.sh)")
    token = "hf_" + "d" * 34
    server = HubServer(tmp_path_factory.mktemp("docker-jobs"), ServerConfig(tokens={token: "write"})).start()
    yield server, HfApi(endpoint=server.url, token=token)
    server.close()


def _containers(job_id: str) -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=org.huggingface.publisher.job={job_id}"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.slow
@pytest.mark.docker
def test_docker_runs_the_image_with_env_secrets_and_a_read_only_volume(docker_hub):
    _, api = docker_hub
    repo = _private_model(api, "weights inside a container")
    secret = uuid.uuid4().hex
    script = ('cat /weights/msg.txt; printf %s "$SECRET" | sha256sum; echo "$PLAIN $JOB_ID"; '
              "if touch /weights/new 2>/dev/null; then echo WRITABLE; exit 1; else echo not writable; fi")
    job = _run(api, script, image=DOCKER_IMAGE, secrets={"SECRET": secret}, env={"PLAIN": "plain"},
               volumes=[Volume(type="model", source=repo, mount_path="/weights", path="weights")])
    lines = _logs(api, job, follow=True)
    assert _wait(api, job).status.stage == "COMPLETED"
    assert lines == ["weights inside a container", f"{hashlib.sha256(secret.encode()).hexdigest()}  -",
                         f"plain {job.id}", "not writable"]
    assert _containers(job.id) == []  # removed once over


@pytest.mark.slow
@pytest.mark.docker
def test_docker_image_that_cannot_be_pulled_ends_in_error(docker_hub):
    _, api = docker_hub
    done = _wait(api, _run(api, "true", image="publisher-test/no-such-image:404"), timeout=180)
    assert done.status.stage == "ERROR"
    assert done.status.message.startswith("Failed to pull image 'publisher-test/no-such-image:404'")
    assert done.started_at is None  # it never ran


@pytest.mark.slow
@pytest.mark.docker
def test_docker_cancel_and_timeout_remove_the_container(docker_hub):
    _, api = docker_hub
    job = _run(api, "echo up; sleep 300", image=DOCKER_IMAGE)
    api.wait_for_job(job.id, namespace=USER, stages=["RUNNING"], poll_interval=0.2)
    api.cancel_job(job_id=job.id, namespace=USER)
    assert api.inspect_job(job_id=job.id, namespace=USER).status.stage == "CANCELED"
    assert _containers(job.id) == []
    slow = _wait(api, _run(api, "sleep 300", image=DOCKER_IMAGE, timeout=3))
    assert slow.status.stage == "ERROR" and "timed out" in slow.status.message
    assert _containers(slow.id) == []


def test_the_docker_executor_without_its_extra_says_so_at_start_and_in_each_job(tmp_path, monkeypatch, capsys):
    """Installed without the `docker` extra, the default executor cannot run a job: the server says so when it
    starts, with the ways out, and a job ends with the same words, never a ModuleNotFoundError."""
    from publisher.cli.hub_server import render_banner
    from publisher.options import HubServerOptions

    monkeypatch.setitem(sys.modules, "docker", None)  # what `import docker` meets without the extra
    options = HubServerOptions.from_args(data_dir=tmp_path / "hub", port=0, tokens=("hf_" + "w" * 34,))
    assert options.jobs_executor == "docker"  # the default
    server = HubServer(options.data_dir, ServerConfig(tokens={options.tokens[0]: "write"})).start()
    try:
        render_banner(server, options)
        banner = capsys.readouterr().err
        assert "warning: the docker executor needs the `docker` Python package, which is not installed" in banner
        assert "pip install 'kernel-publisher[docker]'" in banner and "--jobs-executor process" in banner
        api = HfApi(endpoint=server.url, token=options.tokens[0])
        done = _wait(api, _run(api, "true"))
        assert done.status.stage == "ERROR"
        assert "kernel-publisher[docker]" in done.status.message and "--jobs-executor process" in done.status.message
        assert "ModuleNotFoundError" not in done.status.message and "internal error" not in done.status.message
    finally:
        server.close()
