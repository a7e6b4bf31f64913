"""Hugging Face Jobs as a place (`--on hf-jobs:FLAVOUR[,FLAVOUR...]`).

The run folder goes to a private model repository of the token's user, the
staging repository (`<user>/publisher-staging`, `--staging-repo`), as one
commit under runs/<id>/; each job mounts that commit's folder read-only (a
repo volume) and is given no token: nothing lands on a kernel repository, and
the files leave the staging branch when the run ends (the private repo's
history keeps them). The jobs run in parallel; their stage and log lines are
reported as they come; Ctrl-C, or a job outliving its timeout, cancels every
job still running."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import Volume

from publisher import secrets
from publisher.errors import AuthError, EnvironmentProblem, PublisherError, UsageError
from publisher.push.hub_client import HubClient
from publisher.remote import frames
from publisher.remote.request import BOOTSTRAP, MOUNT
from publisher.remote.runner import JobOutcome, JobPlan, RemoteEvents, RemoteOptions, Target

TERMINAL = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
_POLL = 3.0  # seconds between looks at the jobs' stages
_GRACE = 120.0  # seconds past a job's own timeout before publisher cancels it itself
_LOG_DRAIN = 30.0  # seconds the log of an ended job gets to arrive in full
STAGING_NAME = "publisher-staging"
# Accelerator makers of the Jobs hardware listing -> the backend whose variants they run.
_BACKEND_OF = {"nvidia": "cuda", "amd": "rocm", "intel": "xpu"}

JOB_WRITE_HINT = ("running Jobs needs a token with the job.write permission on the namespace: create a fine-grained "
                  "token at <endpoint>/settings/tokens with \"Start and manage Jobs\" (job.write) checked, "
                  "then `export HF_TOKEN=...` or `hf auth login`")


@dataclass(frozen=True)
class Staged:
    """The run's folder in the staging repository, for what jobs send back (remote builds)."""

    api: object  # HfApi
    repo: str
    path: str  # runs/<id>


def make_runner(targets: Sequence[str], options: RemoteOptions) -> HfJobsRunner:
    return HfJobsRunner(tuple(targets), options)


class HfJobsRunner:
    place_name = "Hugging Face Jobs"

    def __init__(self, flavors: tuple[str, ...], options: RemoteOptions):
        self.flavors = flavors
        self.options = options
        self.client = HubClient(endpoint=options.endpoint, token=options.token)
        self.api = self.client.api
        self._namespace: str | None = options.namespace

    # -- errors ---------------------------------------------------------------
    def _call(self, what: str, fn):
        try:
            return fn()
        except Exception as err:  # noqa: BLE001 - translated into what the user can act on
            raise self._translate(what, err) from None

    def _translate(self, what: str, err: BaseException) -> BaseException:
        status = getattr(getattr(err, "response", None), "status_code", None)
        hint = JOB_WRITE_HINT.replace("<endpoint>", self.client.endpoint)
        if status == 403:
            server = secrets.redact(str(err).splitlines()[0]) if str(err) else "forbidden"
            return AuthError(f"{what}: the token may not run Jobs here (403: {server})", hint)
        if status == 404 and "jobs" in what:
            return EnvironmentProblem(f"{what}: {self.client.endpoint} has no Jobs API (404)",
                                      "Hugging Face Jobs run on huggingface.co (HF_ENDPOINT points elsewhere)")
        translated = self.client.translate(what, err)
        if isinstance(translated, PublisherError) or translated is not err:
            return translated
        return EnvironmentProblem(f"{what}: {secrets.redact(f'{type(err).__name__}: {err}')}")

    @property
    def namespace(self) -> str:
        if self._namespace is None:
            if not self.client.token:
                raise AuthError("Hugging Face Jobs need a token: none was found",
                                JOB_WRITE_HINT.replace("<endpoint>", self.client.endpoint))
            me = self._call("who am I (whoami)", lambda: self.api.whoami())
            self._namespace = str(me.get("name"))
        return self._namespace

    # -- targets -----------------------------------------------------------------
    def targets(self, backends: Sequence[str], any_backend: bool = False) -> list[Target]:
        listing = self._call("list the Jobs hardware", lambda: self.api.list_jobs_hardware())
        known = {hw.name: hw for hw in listing}
        out = []
        for name in self.flavors:
            hw = known.get(name)
            if hw is None:
                gpus = ", ".join(h.name for h in listing if h.accelerator is not None)
                raise UsageError(f"--on hf-jobs:{name}: Hugging Face Jobs have no flavour {name!r}",
                                 f"flavours with a GPU: {gpus or 'none listed'} (`hf jobs hardware` lists them all)")
            acc = hw.accelerator
            if acc is None:
                backend = "cpu"
            else:
                backend = _BACKEND_OF.get((acc.manufacturer or "").lower(), acc.type) if acc.type == "gpu" else acc.type
            gpu = f"{acc.quantity}x {acc.model} ({acc.vram})" if acc is not None else None
            hourly = hw.unit_cost_usd * 60 if hw.unit_label == "minute" else (
                hw.unit_cost_usd if hw.unit_label == "hour" else None)
            target = Target(name=name, pretty=hw.pretty_name, backend=backend, gpu=gpu, usd_per_hour=hourly)
            if not any_backend and backend not in backends:
                raise UsageError(f"--on hf-jobs:{name}: {hw.pretty_name} has "
                                 f"{gpu or 'no GPU'}: none of the variants to test is a {backend} variant (they are "
                                 f"{', '.join(sorted(set(backends)))})",
                                 "name a flavour with that GPU (`hf jobs hardware` lists them), e.g. hf-jobs:l4x1")
            out.append(target)
        return out

    # -- running -----------------------------------------------------------------
    def _stage(self, run_folder: Path, run_id: str, events: RemoteEvents) -> tuple[str, str]:
        repo = self.options.staging_repo or f"{self.namespace}/{STAGING_NAME}"
        self._call(f"create the private staging repository {repo}",
                   lambda: self.api.create_repo(repo, repo_type="model", private=True, exist_ok=True))
        info = self._call(f"read the staging repository {repo}", lambda: self.api.repo_info(repo, repo_type="model"))
        if not getattr(info, "private", False):
            raise UsageError(f"the staging repository {repo} is public: the variants and tests sent to the jobs "
                             "would be readable by anyone",
                             "make it private in its settings, or name a private one with --staging-repo")
        events.note(f"sending the project and variants to {repo} (private), runs/{run_id}/")
        from huggingface_hub.utils import disable_progress_bars
        disable_progress_bars()  # the run is small; the jobs' progress is what the user follows
        commit = self._call(f"upload the run to {repo}", lambda: self.api.upload_folder(
            repo_id=repo, repo_type="model", folder_path=str(run_folder), path_in_repo=f"runs/{run_id}",
            commit_message=f"publisher run {run_id}"))
        return repo, commit.oid

    def _unstage(self, repo: str, run_id: str, events: RemoteEvents) -> None:
        try:
            self.api.delete_folder(path_in_repo=f"runs/{run_id}", repo_id=repo, repo_type="model",
                                   commit_message=f"publisher run {run_id} ended")
        except Exception as err:  # noqa: BLE001 - the run's result stands; say what is left behind
            events.note(secrets.redact(f"could not remove runs/{run_id}/ from {repo}: {type(err).__name__}; "
                                       "delete it by hand"))

    def run(self, plans: Sequence[JobPlan], run_folder: Path, events: RemoteEvents, *, max_parallel: int | None = None,
            upload: bool = False, collect: Callable[[JobOutcome, Staged], None] | None = None) -> list[JobOutcome]:
        """`upload`: the jobs get the token as a secret (HF_TOKEN) to send results back to the staging
        repository (builds); `collect` reads them there before the run's folder is removed."""
        run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        outcomes = [JobOutcome(plan) for plan in plans]
        repo, commit = self._stage(run_folder, run_id, events)
        staged = Staged(self.api, repo, f"runs/{run_id}")
        try:
            self._run_all(outcomes, staged, commit, events, max(1, max_parallel or len(outcomes)), upload)
            for outcome in outcomes:
                if collect is not None:
                    collect(outcome, staged)
        except KeyboardInterrupt:
            self._cancel(outcomes, events, "interrupted")
            raise
        finally:
            self._unstage(repo, run_id, events)
        return outcomes

    def _start(self, outcome: JobOutcome, staged: Staged, commit: str, events: RemoteEvents, upload: bool) -> None:
        plan = outcome.plan
        volume = Volume(type="model", source=staged.repo, revision=commit, path=staged.path, mount_path=MOUNT)
        labels = {"publisher": plan.request.kind, "publisher-run": staged.path.split("/")[-1]}
        if len(plan.request.variants) == 1:
            labels["publisher-variant"] = plan.request.variants[0]
        job = self._call(f"start a job on {plan.target.name}", lambda: self.api.run_job(
            image=plan.image, command=["bash", "-c", BOOTSTRAP],
            env={"PUBLISHER_RUN": MOUNT, "PUBLISHER_REQUEST": plan.key, "PYTHONUNBUFFERED": "1",
                 "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                 "PUBLISHER_STAGING": f"{staged.repo}:{staged.path}"},
            secrets={"HF_TOKEN": self.client.token} if upload else None,
            flavor=plan.target.name, timeout=int(self.options.job_timeout), volumes=[volume], labels=labels,
            namespace=self.namespace))
        outcome.job_id, outcome.url = job.id, getattr(job, "url", None)
        outcome.stage = str(getattr(job.status.stage, "value", job.status.stage))
        outcome.message = job.status.message or ""
        events.job_stage(outcome)

    def _follow(self, outcome: JobOutcome, events: RemoteEvents) -> None:
        try:
            for line in self.api.fetch_job_logs(job_id=outcome.job_id, namespace=self.namespace, follow=True):
                line = secrets.redact(line.rstrip("\n"))
                outcome.log.append(line)
                if not frames.is_frame(line):
                    events.job_line(outcome, line)
        except Exception:  # noqa: BLE001 - the log is read again in full once the job ends
            pass

    def _run_all(self, outcomes: list[JobOutcome], staged: Staged, commit: str, events: RemoteEvents,
                 max_parallel: int, upload: bool) -> None:
        """Start jobs while fewer than max_parallel run; follow each; finish each as it ends."""
        pending = list(outcomes)
        active: dict[int, tuple[JobOutcome, threading.Thread, float]] = {}
        while pending or active:
            while pending and len(active) < max_parallel:
                outcome = pending.pop(0)
                try:
                    self._start(outcome, staged, commit, events, upload)
                except BaseException:
                    self._cancel(outcomes, events, "a job could not start")
                    raise
                follower = threading.Thread(target=self._follow, args=(outcome, events), daemon=True)
                follower.start()
                active[id(outcome)] = (outcome, follower, time.monotonic() + self.options.job_timeout + _GRACE)
            time.sleep(_POLL)
            for key, (outcome, follower, deadline) in list(active.items()):
                try:
                    job = self.api.inspect_job(job_id=outcome.job_id, namespace=self.namespace)
                except Exception:  # noqa: BLE001 - a missed look is retried at the next poll
                    job = None
                if job is not None:
                    stage = str(getattr(job.status.stage, "value", job.status.stage))
                    if stage != outcome.stage:
                        outcome.stage, outcome.message = stage, job.status.message or ""
                        if job.started_at and job.finished_at:
                            outcome.seconds = (job.finished_at - job.started_at).total_seconds()
                        events.job_stage(outcome)
                if outcome.stage not in TERMINAL and time.monotonic() > deadline:
                    self._cancel([outcome], events, f"the job ran past its timeout ({self.options.job_timeout:g}s)")
                if outcome.stage in TERMINAL:
                    del active[key]
                    self._finish(outcome, follower)

    def _finish(self, outcome: JobOutcome, follower: threading.Thread) -> None:
        follower.join(_LOG_DRAIN)
        outcome.payload = frames.decode(outcome.log)
        if outcome.payload is None and outcome.job_id:
            try:  # the stream may have been cut: read the whole log once more
                full = [secrets.redact(x.rstrip("\n")) for x in
                        self.api.fetch_job_logs(job_id=outcome.job_id, namespace=self.namespace)]
                if len(full) >= len(outcome.log):
                    outcome.log = full
                outcome.payload = frames.decode(outcome.log)
            except Exception:  # noqa: BLE001 - then there is no result, and the outcome says so
                pass

    def _cancel(self, outcomes: list[JobOutcome], events: RemoteEvents, why: str) -> None:
        for outcome in outcomes:
            if outcome.job_id and outcome.stage not in TERMINAL:
                try:
                    self.api.cancel_job(job_id=outcome.job_id, namespace=self.namespace)
                    outcome.stage, outcome.message = "CANCELED", why
                    events.note(f"{why}: cancelled job {outcome.job_id} ({outcome.plan.target.name})")
                except Exception as err:  # noqa: BLE001 - say which job may still run
                    events.note(secrets.redact(f"{why}: could not cancel job {outcome.job_id}: {type(err).__name__}; "
                                               f"cancel it with `hf jobs cancel {outcome.job_id}`"))
