"""The interface every build backend (local, docker, nix) implements.

The common driver (scheduler) owns selection, parallelism, caching, the
staging folder, validation of what a backend produced (metadata.json, digest,
ABI check), the atomic move into build/<variant>/, progress and reports. A
backend only has to fill an empty staging folder with one variant's files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from publisher.builder.jobserver import JobServer
from publisher.options import BackendSettings
from publisher.plan.planner import PlannedVariant
from publisher.project.model import Project

LineSink = Callable[[str], None]


@dataclass(frozen=True)
class BuildOptions:
    debug: bool = False  # keep debug info, no stripping
    jobs: int = 1  # variants built at once
    cores: int = 1  # compiler processes per variant; jobs x cores is the run's shared budget
    strict: bool = False  # ABI violations are errors
    force: bool = False  # ignore the cache
    extra_env: tuple[tuple[str, str], ...] = ()  # e.g. index / CA settings passed through


@dataclass(frozen=True)
class BuildRequest:
    project: Project
    planned: PlannedVariant
    stage_dir: Path  # empty; fill with the variant's files (flat, as in build/<variant>/)
    log: Path  # append the full build log here
    work_dir: Path  # persistent per-variant scratch (object files: incremental rebuilds)
    options: BuildOptions
    jobserver: JobServer | None = None  # the run's shared compile slots (local compiles draw from it)


@dataclass(frozen=True)
class BuildOutcome:
    toolchain: dict[str, str] = field(default_factory=dict)  # versions used, for the summary



class Backend(Protocol):
    name: ClassVar[str]

    @classmethod
    def from_settings(cls, settings: BackendSettings, project: Project) -> Backend:
        """The backend, configured from the settings it reads (the others it ignores)."""

    def check_environment(self) -> None:
        """Raise publisher.errors.EnvironmentProblem (with the fix) when the backend cannot run."""

    def input_identity(self, planned: PlannedVariant) -> str:
        """Extra text that goes into the variant's cache key (toolchain identity)."""

    def build(self, request: BuildRequest, on_line: LineSink) -> BuildOutcome:
        """Build one variant into request.stage_dir. Raise BuildFailed or ToolchainUnavailable."""

    def close(self) -> None:
        """Release resources (containers); called once, also after Ctrl-C."""
