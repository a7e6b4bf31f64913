"""The build stage: plan the project's variants, select them, and build them
with the chosen backend through the scheduler. No click here: the command
(publisher/cli/build.py) builds BuildCommandOptions and renders the result."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from publisher.backends import get_backend
from publisher.builder.backend import BuildOptions
from publisher.builder.scheduler import BUILT_STATES, Scheduler, VariantResult, default_budget, failed_in_report
from publisher.errors import UsageError
from publisher.hub_names import is_trust_entry, repo_id_problem
from publisher.options import BuildCommandOptions
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.plan.planner import local_plan, make_plan, select
from publisher.project.load import require_project
from publisher.project.model import Project
from publisher.ui import Progress

if TYPE_CHECKING:
    from publisher.builder.hub_cache import HubCache


@dataclass(frozen=True)
class BuildRun:
    build_dir: Path
    results: tuple[VariantResult, ...]

    @property
    def ok(self) -> bool:
        """Every requested variant is there (a failed, cancelled or toolchain-less one fails the command)."""
        return all(r.state in BUILT_STATES for r in self.results)


def run_build(options: BuildCommandOptions, progress: Progress, note: Callable[[str], None]) -> BuildRun:
    project = require_project(options.path)
    build_dir = options.build_dir
    matrix = load_matrix(find_matrix(project.root, options.matrix_file))
    plan = local_plan(project, matrix) if options.local else make_plan(project, matrix)
    chosen = select(plan, list(options.selection.include), list(options.selection.skip))
    for decision in plan.decisions:
        if decision.rule == "not-in-matrix":
            note(f"warning: {decision.reason}; pass --matrix with a cell for it, or install a torch the matrix lists")
    if options.only_failed:
        failed = failed_in_report(build_dir)
        chosen = tuple(p for p in chosen if p.name in failed)
        if not chosen:
            note("no failed variants to rebuild")
            return BuildRun(build_dir, ())
    if not chosen:
        raise UsageError("no variant to build", f"run `publisher matrix {options.path}` to see why each cell is left out")
    jobs, cores = default_budget(chosen, options.jobs, options.cores)
    compile_options = BuildOptions(debug=options.debug, jobs=jobs, cores=cores, strict=options.strict,
                                   force=options.force)
    backend = get_backend(options.backend, project, options.settings)
    hub_cache = hub_cache_for(project, options, note) if options.hub_cache else None
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        results = Scheduler(project, backend, build_dir, compile_options, progress, fail_fast=options.fail_fast,
                            hub_cache=hub_cache).run(chosen)
    finally:
        signal.signal(signal.SIGTERM, previous)
        backend.close()
    return BuildRun(build_dir, tuple(results))


def hub_cache_for(project: Project, options: BuildCommandOptions, note: Callable[[str], None]) -> HubCache | None:
    """The version branch of the project's Hub repo, when there is one to read."""
    general = project.config.general
    source = "--repo" if options.repo_id else f"{project.build_toml} [general.hub] repo-id"
    repo_id = options.repo_id or general.hub_repo_id
    if not repo_id:
        return None
    problem = repo_id_problem(repo_id)
    if problem:
        raise UsageError(f"{source}: `{repo_id}` is not a Hub repo id ({problem})",
                         "use ORG/NAME with letters, digits, '-', '_' and '.', or pass --no-hub-cache")
    for entry in options.hub_cache_trust:
        if not is_trust_entry(entry):
            raise UsageError(f"--hub-cache-trust: `{entry}` is not a Hub owner or repo id", "use ORG or ORG/NAME")
    branch = general.hub_branch or f"v{general.version}"
    # only now: the Hub client (huggingface_hub) costs ~0.3 s to import, for nothing under --no-hub-cache
    from publisher.builder.hub_cache import HubCache

    return HubCache(repo_id, branch, options.endpoint, on_note=note,
                    trusted=options.hub_cache_trust + project.hub_cache_trust)


def _interrupt(signum, frame) -> None:
    """SIGTERM: stop like Ctrl-C (kill compilers, discard staging)."""
    raise KeyboardInterrupt
