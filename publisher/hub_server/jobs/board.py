"""The jobs of one Hub-compatible server: created, listed, inspected,
cancelled, duplicated; each run in a thread of its own by the executor the
server was started with.

Stages as on the Hub: SCHEDULING (volumes copied, image pulled) -> RUNNING
(the command started; "===== Job started at ... =====" opens the log) ->
COMPLETED (exit 0) | ERROR (status.message says why: exit code, timeout,
pull failure ...) | CANCELED. A job with `attempts` > 1 runs again after a
non-zero exit, the log going on; status.failureCount counts the failures.
`timeoutSeconds` (the Hub's default when absent) runs from the first start.

<jobs dir>/<namespace>/<id>/
    job.json     the record: spec without secret values, stage, times
    log.ndjson   the log, one {"data", "timestamp"} event a line
    volumes/ work/   while the job runs only

Secrets live in memory only: a job loaded from an earlier run of the server
cannot be duplicated when it had some. A job that was running when the server
went away (killed) is loaded as ERROR.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets as random
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from publisher.errors import HubError
from publisher.hub_server.jobs import volumes
from publisher.hub_server.jobs.executor import (
    NOTE,
    Attempt,
    Executor,
    Launch,
    LaunchFailed,
    Mount,
    make_executor,
)
from publisher.hub_server.jobs.hardware import default_timeout_seconds, flavors
from publisher.hub_server.jobs.log import JobLog, iso_ms
from publisher.hub_server.jobs.metrics import host_memory
from publisher.hub_server.jobs.spec import JobSpec, labels_from, parse_spec, split_secrets
from publisher.hub_server.storage import Repo, Storage

TERMINAL = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
_POLL = 0.2  # seconds between looks at a running attempt (cancel, timeout)
_CANCEL_WAIT = 20.0  # how long a cancel request waits for the job to be gone before answering
_GIB = 1024**3


def object_id(name: str) -> str:
    """A stable 24-hex id for a user or org name (the Hub's ids are Mongo ObjectIds)."""
    return hashlib.sha1(name.encode()).hexdigest()[:24]


@dataclass
class JobRecord:
    id: str
    namespace: str
    owner_type: str  # user | org
    created_by: str
    spec: JobSpec
    pinned: tuple[str, ...]  # the commit each volume was pinned to
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    stage: str = "SCHEDULING"
    message: str | None = None
    failure_count: int = 0
    initiator: dict | None = None

    def to_file(self) -> dict:
        data = {k: v for k, v in vars(self).items() if k != "spec"}
        data["pinned"] = list(self.pinned)
        data["spec"] = self.spec.to_body()
        return data

    @classmethod
    def from_file(cls, data: dict) -> JobRecord:
        fields = dict(data)
        fields["spec"] = parse_spec(fields["spec"])
        fields["pinned"] = tuple(fields.get("pinned", ()))
        return cls(**fields)


@dataclass
class Job:
    record: JobRecord
    folder: Path
    log: JobLog
    secrets: Mapping[str, str] | None  # None: lost (loaded from an earlier run of the server)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    stop_reason: str = ""  # "cancel" | "shutdown"
    thread: threading.Thread | None = None
    attempt: Attempt | None = None

    @property
    def done(self) -> bool:
        return self.record.stage in TERMINAL


class JobBoard:
    def __init__(self, jobs_dir: Path, storage: Storage, executor_name: str, server_url: str, user: str):
        self.jobs_dir = Path(jobs_dir)
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self.storage = storage
        self.executor_name = executor_name
        self.server_url = server_url
        self.user = user
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._executor: Executor | None = None
        self._closing = False
        self._load()

    # -- queries ---------------------------------------------------------------
    def get(self, namespace: str, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.record.namespace != namespace:
            raise HubError(404, f"Job {job_id} not found in namespace {namespace}")
        return job

    def list(self, namespace: str, stages: Iterable[str] = (), labels: Mapping[str, str] | None = None) -> list[Job]:
        """Newest first."""
        wanted = set(stages)
        with self._lock:
            jobs = [j for j in self._jobs.values() if j.record.namespace == namespace]
        jobs = [j for j in jobs if (not wanted or j.record.stage in wanted)
                and all(j.record.spec.labels.get(k) == v for k, v in (labels or {}).items())]
        return sorted(jobs, key=lambda j: (j.record.created_at, j.record.id), reverse=True)

    def info(self, job: Job) -> dict:
        """The JobInfo answer (camelCase, as the Hub's schema has it; secrets by name only)."""
        with job.lock:
            r = job.record
            spec = r.spec
            now = time.time()
            durations: dict = {"totalSecs": int((r.finished_at or now) - r.created_at)}
            if r.started_at is not None:
                durations["schedulingSecs"] = int(r.started_at - r.created_at)
                durations["runningSecs"] = int((r.finished_at or now) - r.started_at)
            owner = {"id": object_id(r.namespace), "name": r.namespace, "type": r.owner_type, "avatarUrl": ""}
            out: dict = {
                "id": r.id, "type": "job", "createdAt": iso_ms(r.created_at),
                "command": list(spec.command), "arguments": list(spec.arguments),
                "environment": dict(spec.environment), "secrets": list(spec.secret_names), "flavor": spec.flavor,
                "labels": dict(spec.labels), "timeout": spec.timeout_seconds or default_timeout_seconds(),
                "retry": spec.attempts - 1, "createdBy": {"id": object_id(r.created_by), "name": r.created_by},
                "owner": owner, "initiator": r.initiator or {"id": object_id(r.created_by), "name": r.created_by,
                                                              "type": "user", "avatarUrl": ""},
                "status": {"stage": r.stage, "message": r.message, "failureCount": r.failure_count},
                "durations": durations,
            }
            optional = {"dockerImage": spec.docker_image, "spaceId": spec.space_id, "arch": spec.arch,
                        "resourceGroupId": spec.resource_group_id,
                        "startedAt": iso_ms(r.started_at) if r.started_at else None,
                        "finishedAt": iso_ms(r.finished_at) if r.finished_at else None}
            out.update({k: v for k, v in optional.items() if v is not None})
            if spec.volumes:
                out["volumes"] = [v.to_api() for v in spec.volumes]
            return out

    def sample(self, job: Job) -> dict | None:
        attempt = job.attempt
        return attempt.sample() if attempt is not None else None

    # -- changes ---------------------------------------------------------------
    def create(self, namespace: str, owner_type: str, user: str, body: Mapping,
               can_read: Callable[[Repo], bool], initiator: dict | None = None) -> Job:
        rest, secret_values = split_secrets(body)
        spec = parse_spec(rest)
        return self._submit(namespace, owner_type, user, spec, secret_values, can_read, initiator)

    def duplicate(self, job: Job, user: str, can_read: Callable[[Repo], bool]) -> Job:
        r = job.record
        if job.secrets is None and r.spec.secret_names:
            raise HubError(400, f"Job {r.id} was created before this server restarted and its secrets "
                                f"({', '.join(r.spec.secret_names)}) are not kept across restarts; "
                                "run it again with its secrets")
        return self._submit(r.namespace, r.owner_type, user, r.spec, dict(job.secrets or {}), can_read,
                            {"type": "duplicated-job", "id": r.id})

    def set_labels(self, job: Job, labels: object) -> None:
        new = labels_from(labels)
        with job.lock:
            job.record.spec = job.record.spec.with_labels(new)
            self._save(job)

    def cancel(self, job: Job) -> None:
        """Stop the job (its process or container killed) and wait, a while, until it is gone."""
        with job.lock:
            if job.done:
                return
            job.stop_reason = job.stop_reason or "cancel"
        job.stop.set()
        if job.thread is not None and job.thread is not threading.current_thread():
            job.thread.join(_CANCEL_WAIT)

    def close(self) -> int:
        """Stop every job still running (the server is going away); how many there were."""
        with self._lock:
            self._closing = True
            live = [j for j in self._jobs.values() if not j.done]
        for job in live:
            with job.lock:
                job.stop_reason = job.stop_reason or "shutdown"
            job.stop.set()
        for job in live:
            if job.thread is not None:
                job.thread.join(60)
        if self._executor is not None:
            self._executor.close()
        return len(live)

    # -- running ---------------------------------------------------------------
    def _submit(self, namespace, owner_type, user, spec: JobSpec, secret_values, can_read, initiator) -> Job:
        pinned = tuple(volumes.pin(self.storage, v, can_read).commit for v in spec.volumes)
        now = time.time()
        job_id = f"{int(now):08x}{random.token_hex(8)}"
        record = JobRecord(job_id, namespace, owner_type, user, spec, pinned, now, initiator=initiator)
        folder = self.jobs_dir / namespace / job_id
        folder.mkdir(parents=True)
        job = Job(record, folder, JobLog(folder / "log.ndjson"), dict(secret_values))
        with self._lock:
            if self._closing:
                raise HubError(503, "The server is shutting down")
            self._jobs[job_id] = job
        self._save(job)
        job.thread = threading.Thread(target=self._run, args=(job,), name=f"job-{job_id}", daemon=True)
        job.thread.start()
        return job

    def _executor_now(self) -> Executor:
        with self._lock:
            if self._executor is None:
                self._executor = make_executor(self.executor_name)
            return self._executor

    def _run(self, job: Job) -> None:
        try:
            executor = self._executor_now()
            launch = self._launch(job)
            executor.prepare(launch, job.log.append)
            if job.stop.is_set():
                self._stopped(job, "before it started")
                return
            self._attempts(job, executor, launch)
        except LaunchFailed as err:
            self._end(job, "ERROR", err.message)
        except Exception as err:  # a bug of this server: the job must not stay RUNNING forever
            traceback.print_exc(file=sys.stderr)
            self._end(job, "ERROR", f"hub-server internal error: {type(err).__name__}: {err}")
        finally:
            if not job.done:  # stopped in a way nothing above recorded
                self._end(job, "ERROR", "The job ended without an outcome")
            shutil.rmtree(job.folder / "volumes", ignore_errors=True)
            shutil.rmtree(job.folder / "work", ignore_errors=True)
            job.log.close()

    def _attempts(self, job: Job, executor: Executor, launch: Launch) -> None:
        spec = job.record.spec
        timeout = spec.timeout_seconds or default_timeout_seconds()
        deadline = None
        for number in range(1, spec.attempts + 1):
            self._running(job)
            if deadline is None:
                deadline = time.monotonic() + timeout
            attempt = executor.start(launch, job.log.append)
            job.attempt = attempt
            try:
                code = self._watch(job, attempt, deadline)
            finally:
                job.attempt = None
            if code == 0:
                self._end(job, "COMPLETED", None)
                return
            if code is None:
                if job.stop.is_set():
                    self._stopped(job, "while it ran")
                else:
                    self._end(job, "ERROR", f"Job timed out: it ran longer than its timeout of {timeout} seconds "
                                            "and was stopped")
                return
            with job.lock:
                job.record.failure_count += 1
            if number < spec.attempts:
                job.log.append(f"{NOTE} attempt {number} of {spec.attempts} failed with exit code {code}; retrying")
                continue
            self._end(job, "ERROR", f"Job failed with exit code: {code}")

    def _watch(self, job: Job, attempt: Attempt, deadline: float) -> int | None:
        """The exit code, or None once the attempt was stopped (cancel, shutdown, timeout)."""
        while True:
            code = attempt.wait(_POLL)
            if code is not None:
                return code
            if job.stop.is_set() or time.monotonic() >= deadline:
                attempt.stop()
                return None

    def _stopped(self, job: Job, when: str) -> None:
        if job.stop_reason == "shutdown":
            self._end(job, "ERROR", f"The hub-server shut down {when}: the job was stopped")
        else:
            self._end(job, "CANCELED", None)

    def _running(self, job: Job) -> None:
        with job.lock:
            first = job.record.started_at is None
            if first:
                job.record.started_at = time.time()
            job.record.stage = "RUNNING"
            self._save(job)
        if first:
            job.log.append(f"===== Job started at {iso_ms(job.record.started_at)} =====")

    def _end(self, job: Job, stage: str, message: str | None) -> None:
        with job.lock:
            if job.done:
                return
            job.record.stage, job.record.message = stage, message
            job.record.finished_at = time.time()
            self._save(job)

    def _launch(self, job: Job) -> Launch:
        """Volumes copied out of the storage, the environment the command gets."""
        r = job.record
        spec = r.spec
        flavor = flavors()[spec.flavor]
        mounts = []
        for index, (volume, commit) in enumerate(zip(spec.volumes, r.pinned, strict=True)):
            dest = job.folder / "volumes" / str(index)
            try:
                volumes.materialize(self.storage, volumes.PinnedVolume(volume, commit), dest)
            except OSError as err:
                raise LaunchFailed(f"Failed to mount volume {volume.describe()}: {err}") from None
            mounts.append(Mount(dest, volume.mount_path, volume.mounted_read_only))
        workdir = job.folder / "work"
        workdir.mkdir(exist_ok=True)
        cpus = max(1, int(min(flavor.cpus, os.cpu_count() or 1)))
        memory = min(flavor.memory_bytes, host_memory() or flavor.memory_bytes)
        environment = {
            # the Hub's built-in variables (jobs-configuration docs), with what this machine gives
            "JOB_ID": r.id, "ACCELERATOR": flavor.name if flavor.gpu else "none", "CPU_CORES": str(cpus),
            "MEMORY": f"{max(1, memory // _GIB)}Gi",
            # on the Hub, huggingface_hub in a job reaches the Hub by default; here the Hub is this server
            "HF_ENDPOINT": self.server_url, "HF_HUB_DISABLE_XET": "1",
            **spec.environment, **(job.secrets or {}),
        }
        return Launch(job_id=r.id, image=spec.docker_image, space_id=spec.space_id, command=spec.command,
                      arguments=spec.arguments, environment=environment, flavor=flavor, mounts=tuple(mounts),
                      workdir=workdir, secret_names=frozenset(spec.secret_names))

    # -- persistence -------------------------------------------------------------
    def _save(self, job: Job) -> None:
        path = job.folder / "job.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(job.record.to_file(), indent=1))
        os.replace(tmp, path)

    def _load(self) -> None:
        for path in sorted(self.jobs_dir.glob("*/*/job.json")):
            try:
                record = JobRecord.from_file(json.loads(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError, HubError) as err:
                print(f"hub-server: skipping job file {path}: {err}", file=sys.stderr)
                continue
            job = Job(record, path.parent, JobLog(path.parent / "log.ndjson"), None)
            if not job.done:
                record.stage, record.finished_at = "ERROR", time.time()
                record.message = "The hub-server stopped while the job was running"
                self._save(job)
            shutil.rmtree(path.parent / "volumes", ignore_errors=True)
            shutil.rmtree(path.parent / "work", ignore_errors=True)
            self._jobs[record.id] = job

