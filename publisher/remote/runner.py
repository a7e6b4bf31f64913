"""What every place's runner offers (one module per place implements it; see
resources/places.yaml), and the values that pass between the remote stage and
a runner."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from publisher.remote.request import JobRequest


@dataclass(frozen=True)
class RemoteOptions:
    endpoint: str | None = None
    token: str | None = None
    job_timeout: float = 3600.0  # seconds one job may run, setup included
    image: str | None = None  # every job in this image (default: resources/job_images.yaml per variant)
    staging_repo: str | None = None  # default: <namespace>/publisher-staging (private)
    namespace: str | None = None  # whose jobs (default: the token's user)


@dataclass(frozen=True)
class Target:
    """One place target (a Jobs flavour) as the place describes it."""

    name: str
    pretty: str
    backend: str  # the variants it runs: cuda, rocm, ... for a GPU, cpu for a CPU-only target
    gpu: str | None  # e.g. "1x L4 (24 GB)"
    usd_per_hour: float | None


@dataclass(frozen=True)
class JobPlan:
    key: str
    target: Target
    image: str
    request: JobRequest


@dataclass
class JobOutcome:
    plan: JobPlan
    job_id: str | None = None
    url: str | None = None
    stage: str = "NOT STARTED"
    message: str = ""
    payload: dict | None = None  # what the job sent back (remote/frames.py)
    log: list[str] = field(default_factory=list)
    seconds: float | None = None

    def tail(self, lines: int = 15) -> str:
        """The last lines of the job's log, without the result frames."""
        return "\n".join([line for line in self.log if not line.startswith("@publisher-result")][-lines:])


class RemoteEvents(Protocol):
    def note(self, line: str) -> None:
        """A line about the remote work as a whole (cost, staging, cancel)."""

    def job_stage(self, outcome: JobOutcome) -> None:
        """A job changed stage (SCHEDULING, RUNNING, COMPLETED, ERROR, CANCELED)."""

    def job_line(self, outcome: JobOutcome, line: str) -> None:
        """A line of a job's log, as it comes."""


class Runner(Protocol):
    place_name: str

    def targets(self, backends: Sequence[str]) -> list[Target]:
        """The place's targets for the variants' backends; raises UsageError for a target it lacks or one
        without the accelerator the variants need."""

    def run(self, plans: Sequence[JobPlan], run_folder: Path, events: RemoteEvents) -> list[JobOutcome]:
        """Send the run folder, run one job per plan, wait for them (Ctrl-C or the timeout cancels them),
        remove what was sent, and return each job's outcome."""
