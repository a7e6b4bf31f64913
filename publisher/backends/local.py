"""The local backend: builds a variant on this machine with a PyPI toolchain
(its torch in an isolated environment, g++ and nvcc) driven by ninja."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from typing import ClassVar

from publisher.builder import package
from publisher.builder.backend import BackendSettings, BuildOutcome, BuildRequest, LineSink
from publisher.builder.compile import compile_variant, device_archs
from publisher.builder.inputs import ops_unique, source_digest
from publisher.builder.jobserver import JobServer
from publisher.builder.metadata import write_metadata
from publisher.errors import BuildFailed, EnvironmentProblem
from publisher.git import git_state
from publisher.plan.planner import PlannedVariant
from publisher.project.model import Project
from publisher.toolchains.provision import ensure_toolchain, recorded_identity


class LocalBackend:
    name: ClassVar[str] = "local"

    @classmethod
    def from_settings(cls, settings: BackendSettings, project: Project) -> LocalBackend:
        return cls()  # the local backend has no settings of its own

    def check_environment(self) -> None:
        if not (shutil.which("g++") or shutil.which("c++")):
            raise EnvironmentProblem("no C++ compiler found", "install g++ (Debian/Ubuntu: apt-get install g++)")

    def input_identity(self, planned: PlannedVariant) -> str:
        if planned.variant.framework == "torch-noarch":
            return "noarch"
        return recorded_identity(planned.toolchain) or f"not-created:{planned.toolchain.key}"

    def build(self, request: BuildRequest, on_line: LineSink) -> BuildOutcome:
        project, planned, stage = request.project, request.planned, request.stage_dir
        assert project.root is not None
        git = git_state(project.root)
        noarch = planned.variant.framework == "torch-noarch"
        versions: dict[str, str] = {}
        archs: tuple[str, ...] = ()
        toolchain = None if noarch else ensure_toolchain(planned.toolchain, on_line, request.log)
        unique = ops_unique(planned, toolchain.identity if toolchain else "noarch", request.options.debug,
                            source_digest(project))
        ops = package.ops_id(project, planned.backend, unique)
        if toolchain:
            versions = toolchain.versions()
            with contextlib.ExitStack() as stack:
                jobserver = request.jobserver or stack.enter_context(_own_jobserver(request.options.cores))
                library = compile_variant(
                    project, planned, toolchain, ops, request.work_dir,
                    jobserver=jobserver, cores=request.options.cores, debug=request.options.debug, log=request.log,
                    on_line=on_line,
                )
            shutil.copy2(library, stage / library.name)
            archs = device_archs(project, planned) if planned.backend == "cuda" else planned.archs
        try:
            package.copy_python_package(project, stage)
        except FileNotFoundError as err:
            raise BuildFailed(str(err)) from None
        package.write_ops_py(stage, ops, compiled=not noarch)
        fields = package.metadata_fields(project, planned, ops, archs, git, versions)
        write_metadata(stage, fields)
        return BuildOutcome(toolchain=versions)

    def close(self) -> None:
        """Nothing to release: everything ran as child processes of this one."""


@contextlib.contextmanager
def _own_jobserver(cores: int) -> Iterator[JobServer]:
    """A build called outside the scheduler gets `cores` slots of its own."""
    server = JobServer(cores)
    try:
        yield server
    finally:
        server.close()
