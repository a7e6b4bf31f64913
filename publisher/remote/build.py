"""`publisher build --on PLACE:FLAVOUR`: one job per variant (at most --max-parallel at once),
each building its variant with this publisher's local backend in an image that can compile
it; each built variant comes back through the private staging repository, is verified
against its own metadata.json (every file's digest) and lands in build/<variant>/ as if built
here (state `built-remote`). No job is started for a variant whose build/<variant>/ was made
from the same inputs (`cached`), one the Hub cache holds (`fetched`, as a local build takes
it), or one the place cannot build (`unavailable`, with the reason). Failed, cancelled and
unavailable variants are recorded as a local build records them, so `--only-failed` rebuilds
just those."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from publisher import state
from publisher.builder import atomic as staging
from publisher.builder.backend import BuildOptions
from publisher.builder.inputs import inputs_fingerprint, source_digest
from publisher.builder.metadata import check_variant, read_metadata, recorded_inputs
from publisher.builder.scheduler import VariantResult, failed_in_report, recorded_toolchain
from publisher.builder.stage import BuildRun, hub_cache_for
from publisher.errors import UsageError
from publisher.options import BuildCommandOptions
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.plan.planner import PlannedVariant, make_plan, select
from publisher.project.load import require_project
from publisher.project.model import Project
from publisher.remote import place as places
from publisher.remote.bundle import make_run_folder
from publisher.remote.images import image_for
from publisher.remote.request import JobRequest
from publisher.remote.runner import JobOutcome, JobPlan
from publisher.remote.stage import RemoteTestOptions, _Lines, estimate
from publisher.toolchains.provision import obtainable_problem

Sink = Callable[[str], None]
# what a job builds with: the local backend at its default settings (the fingerprint it records)
_JOB_BACKEND = "local"


def run_remote_build(options: BuildCommandOptions, remote: RemoteTestOptions, max_parallel: int | None,
                     note: Sink, per: str | None = None) -> BuildRun:
    """per: one job per "variant" or per "image" (None: the place's build_jobs in places.yaml)."""
    per = per or remote.place.info.build_jobs
    if per not in JOB_GROUPINGS:
        raise UsageError(f"places.yaml: {remote.place.info.key} build_jobs {per!r} is not a job grouping",
                         f"use one of {', '.join(JOB_GROUPINGS)}")
    project = require_project(options.path)
    build_dir = options.build_dir
    matrix = load_matrix(find_matrix(project.root, options.matrix_file))
    chosen = select(make_plan(project, matrix), list(options.selection.include), list(options.selection.skip))
    if options.only_failed:
        failed = failed_in_report(build_dir)
        chosen = tuple(p for p in chosen if p.name in failed)
        if not chosen:
            note("no failed variants to rebuild")
            return BuildRun(build_dir, ())
    if not chosen:
        raise UsageError("no variant to build", f"run `publisher matrix {options.path}` to see why each cell is left out")
    if len(remote.place.targets) != 1:
        raise UsageError(f"--on {remote.place}: builds run on one flavour", "name one, e.g. --on hf-jobs:cpu-upgrade")
    results: dict[str, VariantResult] = {}
    images: dict[str, str] = {}
    for planned in chosen:
        why = cannot_build_there(planned, remote.place)
        image = None if why else (remote.remote.image or image_for(planned.name, build=True))
        if why is None and image is None:
            why = "publisher knows no image for this variant's torch; pass --image"
        if why:
            results[planned.name] = VariantResult(planned.name, "unavailable", reason=why)
        else:
            images[planned.name] = image
    build_dir.mkdir(parents=True, exist_ok=True)
    with staging.build_lock(build_dir):
        results.update(_reuse(project, options, [p for p in chosen if p.name in images], note))
        todo = [p for p in chosen if p.name in images and p.name not in results]
        if todo:
            results.update(_build_in_jobs(project, options, remote, todo, images, max_parallel, per, note))
    ordered = tuple(results[p.name] for p in chosen)
    state.update_report(state.build_report_path(build_dir), {r.variant: r.report_entry() for r in ordered})
    return BuildRun(build_dir, ordered)


def cannot_build_there(planned: PlannedVariant, place: places.Place) -> str | None:
    """Why a job at `place` cannot build this variant (its platform, a toolkit the local backend cannot
    make); None when it can. A Python-only variant builds anywhere."""
    if planned.variant.framework == "torch-noarch" or not place.info.platform:
        return None
    platform = planned.toolchain.platform
    if platform != place.info.platform:
        return f"{place.info.name} runs {place.info.platform} machines only; build {platform} variants on such a machine"
    problem = obtainable_problem(platform, planned.toolchain.compute, place.info.platform)
    return f"a {place.info.name} job builds with publisher's own toolchains: {problem}" if problem else None


def _reuse(project: Project, options: BuildCommandOptions, planned: Sequence[PlannedVariant],
           note: Sink) -> dict[str, VariantResult]:
    """The variants no job needs to build: build/<variant>/ made from the same inputs (unless --force), or
    the Hub cache's copy (unless --no-hub-cache), moved into place as a local build moves it."""
    if not planned:
        return {}
    build_dir = options.build_dir
    sources = source_digest(project)
    wanted = {p.name: inputs_fingerprint(project, p, BuildOptions(), _JOB_BACKEND, sources)  # what a job builds
              for p in planned}
    found: dict[str, VariantResult] = {}
    report = state.read_report(state.build_report_path(build_dir))["variants"]
    for name, fingerprint in wanted.items():
        target = build_dir / name
        if options.force or not check_variant(target).ok or recorded_inputs(read_metadata(target)) != fingerprint:
            continue
        entry = report.get(name) or {}
        found[name] = VariantResult(name, "cached", fingerprint=state.variant_fingerprint(target),
                                    inputs=entry.get("inputs"), source=entry.get("source"),
                                    backend=entry.get("backend") or _JOB_BACKEND, toolchain=recorded_toolchain(target))
        note(f"{name}: build/{name} was built from these inputs; no job needed")
    rest = [name for name in wanted if name not in found]
    cache = hub_cache_for(project, options, note) if rest and options.hub_cache else None
    for name in rest if cache is not None else ():
        stage = staging.new_stage(build_dir, name)
        try:
            hit = cache.fetch(name, wanted[name], stage)
            if hit.source:
                target = build_dir / name
                staging.promote(stage, target)
                found[name] = VariantResult(name, "fetched", fingerprint=state.variant_fingerprint(target),
                                            source=f"hub cache {hit.source}", backend=_JOB_BACKEND,
                                            toolchain=recorded_toolchain(target))
                note(f"{name}: {hit.reason}; no job needed")
        finally:
            staging.discard(stage)
    return found


def _build_in_jobs(project: Project, options: BuildCommandOptions, remote: RemoteTestOptions,
                   todo: Sequence[PlannedVariant], images: dict[str, str], max_parallel: int | None, per: str,
                   note: Sink) -> dict[str, VariantResult]:
    build_dir = options.build_dir
    runner = places.load_module(remote.place).make_runner(remote.place.targets, remote.remote)
    [target] = runner.targets([], any_backend=True)
    matrix = "matrix.yaml" if options.matrix_file else None
    plans = [JobPlan(key=key, target=target, image=image, request=JobRequest(kind="build", variants=names,
                                                                               matrix=matrix))
             for key, image, names in group_jobs([p.name for p in todo], images, per)]
    note(f"building on {runner.place_name}: {len(todo)} variant(s) in {len(plans)} job(s), "
         f"at most {max_parallel or len(plans)} at once")
    for line in estimate(plans, remote.remote.job_timeout):
        note(line)
    fetched: dict[str, VariantResult] = {}
    with tempfile.TemporaryDirectory(prefix="publisher-run-") as tmp:
        folder = make_run_folder(Path(tmp) / "run", project.root, build_dir, [], {p.key: p.request for p in plans},
                                 options.matrix_file)
        outcomes = runner.run(plans, folder, _Lines(note), max_parallel=max_parallel, upload=True,
                              collect=lambda outcome, staged: fetched.update(_collect(outcome, staged, build_dir,
                                                                                       remote, note)))
    return {name: fetched.get(name) or _failed(outcome, name) for outcome in outcomes
            for name in outcome.plan.request.variants}


JOB_GROUPINGS = ("variant", "image")


def group_jobs(names: Sequence[str], images: dict[str, str], per: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(job key, image, variants) for each job: one per variant, or (per="image") one per image, whose
    variants then share the image pull and the job's cores."""
    if per not in JOB_GROUPINGS:
        raise UsageError(f"unknown job grouping {per!r}", f"use one of {', '.join(JOB_GROUPINGS)}")
    if per == "variant":
        return [(name, images[name], (name,)) for name in names]
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(images[name], []).append(name)
    return [(group[0] if len(group) == 1 else f"{group[0]}+{len(group) - 1}", image, tuple(group))
            for image, group in groups.items()]


def _job_result(outcome: JobOutcome, name: str) -> dict:
    for entry in (outcome.payload or {}).get("results") or []:
        if entry.get("variant") == name:
            return entry
    return {}


def _failed(outcome: JobOutcome, name: str) -> VariantResult:
    entry = _job_result(outcome, name)
    where = f"job {outcome.job_id} on {outcome.plan.target.name}"
    if entry and entry.get("state") in ("failed", "unavailable", "cancelled"):
        return VariantResult(name, entry["state"], seconds=entry.get("seconds") or 0.0, error=entry.get("error"),
                             reason=entry.get("reason"), inputs=entry.get("inputs"), source=where)
    if outcome.stage == "CANCELED":
        return VariantResult(name, "cancelled", error=f"{where} was cancelled{': ' + outcome.message if outcome.message else ''}",
                             source=where)
    why = (outcome.payload or {}).get("error") or f"ended {outcome.stage}{': ' + outcome.message if outcome.message else ''}"
    tail = outcome.tail(5).replace("\n", " | ")
    return VariantResult(name, "failed", error=f"{where}: {why}" + (f" (log: {tail})" if tail else ""), source=where)


def _collect(outcome: JobOutcome, staged, build_dir: Path, remote: RemoteTestOptions, note: Sink) -> dict:
    """The variants the job sent, each verified and moved into build/<variant>/ (one it did not send: none)."""
    found: dict[str, VariantResult] = {}
    for name in outcome.plan.request.variants:
        found.update(_collect_one(outcome, name, staged, build_dir, remote, note))
    return found


def _collect_one(outcome: JobOutcome, name: str, staged, build_dir: Path, remote: RemoteTestOptions,
                 note: Sink) -> dict:
    commit = ((outcome.payload or {}).get("uploaded") or {}).get(name)
    if not commit:
        return {}
    entry = _job_result(outcome, name)
    where = f"{remote.place.info.key} {outcome.plan.target.name} job {outcome.job_id}"
    stage = staging.new_stage(build_dir, name)  # where a local build stages: the next build clears a killed run's
    try:
        prefix = f"{staged.path}/out/{name}"
        staged.api.snapshot_download(repo_id=staged.repo, repo_type="model", revision=commit,
                                     allow_patterns=[f"{prefix}/**"], local_dir=stage)
        got = stage / prefix
        check = check_variant(got)
        if not check.ok:
            return {name: VariantResult(name, "failed", error=f"{where}: the variant that came back does not match its "
                                        f"metadata.json: {'; '.join(check.problems[:3])}", source=where)}
        target = build_dir / name
        staging.promote(got, target)  # as a local build puts its variant in place
    finally:
        staging.discard(stage)
    note(f"{name}: fetched from {where}, every file's digest checked")
    return {name: VariantResult(name, "built-remote", seconds=entry.get("seconds") or outcome.seconds or 0.0,
                                fingerprint=state.variant_fingerprint(target), inputs=entry.get("inputs"),
                                source=where, backend=_JOB_BACKEND, toolchain=entry.get("toolchain") or {}, at=time.time())}
