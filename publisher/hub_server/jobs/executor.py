"""Where a job's command runs: the executor interface, and the executors by name.

An executor is one small module with one class:

    class SomeExecutor:
        name = "some"
        def __init__(self): ...
        def prepare(self, launch: Launch, note: LineSink) -> None
            # everything before the command starts (pull an image, check the machine);
            # raise LaunchFailed(message) to end the job in ERROR with that message
        def start(self, launch: Launch, on_line: LineSink) -> Attempt
            # start the command; its stdout+stderr lines go to on_line
        def close(self) -> None    # stop whatever it still runs (server shutdown)

and an Attempt (one run of the command) answers `wait(timeout) -> exit code | None`,
`stop()` (kill everything it started; idempotent; returns once it is gone) and
`sample() -> metrics dict | None`. The job board (board.py) calls prepare and
start from the job's own thread and keeps that thread until the attempt is over.

Adding one (Kubernetes, SSH to a runner): a module here and a line in EXECUTORS.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from publisher.errors import EnvironmentProblem
from publisher.hub_server.jobs.hardware import Flavor

LineSink = Callable[[str], None]

# name -> "module:Class"; the module is imported only when that executor is used.
EXECUTORS: Mapping[str, str] = {
    "docker": "publisher.hub_server.jobs.docker_executor:DockerExecutor",
    "process": "publisher.hub_server.jobs.process_executor:ProcessExecutor",
}
DEFAULT_EXECUTOR = "docker"
# name -> the Python module it needs that publisher installs only with an extra, and that extra
_NEEDS: Mapping[str, tuple[str, str]] = {"docker": ("docker", "docker")}
NOTE = "[hub-server]"  # how the server's own remarks start in a job's log


class LaunchFailed(Exception):
    """The command could not be started; the job ends in ERROR with `message`."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Mount:
    host_path: Path  # a folder this server filled for the job
    mount_path: str  # where the command sees it
    read_only: bool = True


@dataclass(frozen=True)
class Launch:
    """Everything an executor needs to run one job (secrets included, in `environment`)."""

    job_id: str
    image: str | None  # a Docker image; None for a Space's image
    space_id: str | None
    command: tuple[str, ...]  # the image's entrypoint replaced, as Kubernetes' `command` does
    arguments: tuple[str, ...]
    environment: Mapping[str, str]
    flavor: Flavor
    mounts: tuple[Mount, ...] = ()
    workdir: Path | None = None  # a folder of the job's own, for executors that need one
    secret_names: frozenset[str] = field(default_factory=frozenset)

    @property
    def argv(self) -> tuple[str, ...]:
        return (*self.command, *self.arguments)


class Attempt(Protocol):
    def wait(self, timeout: float | None) -> int | None: ...

    def stop(self) -> None: ...

    def sample(self) -> dict | None: ...


class Executor(Protocol):
    name: str

    def prepare(self, launch: Launch, note: LineSink) -> None: ...

    def start(self, launch: Launch, on_line: LineSink) -> Attempt: ...

    def close(self) -> None: ...


class Running:
    """The attempts an executor has under way, so that `close()` can stop them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: set[Attempt] = set()

    def add(self, attempt: Attempt) -> None:
        with self._lock:
            self._attempts.add(attempt)

    def discard(self, attempt: Attempt) -> None:
        with self._lock:
            self._attempts.discard(attempt)

    def stop_all(self) -> None:
        with self._lock:
            attempts = list(self._attempts)
        for attempt in attempts:
            attempt.stop()


def unmet_requirement(name: str) -> str | None:
    """Why executor `name` cannot run a job in this installation, with the ways out; None when it can."""
    if name not in _NEEDS:
        return None
    module, extra = _NEEDS[name]
    if importlib.util.find_spec(module) is not None:
        return None
    others = ", ".join(f"`--jobs-executor {n}`" for n in EXECUTORS if n not in _NEEDS)
    return (f"the {name} executor needs the `{module}` Python package, which is not installed: every job would "
            f"end in ERROR. Install it with `pip install 'kernel-publisher[{extra}]'`, or start the server with "
            f"{others} (jobs then run as plain processes on this machine)")


def make_executor(name: str) -> Executor:
    if name not in EXECUTORS:
        raise EnvironmentProblem(f"unknown jobs executor {name!r}", f"use one of {', '.join(EXECUTORS)}")
    module, _, cls = EXECUTORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)()
