"""`publisher build --on PLACE:FLAVOUR`: one job per variant (at most --max-parallel at once),
each building its variant with this publisher's local backend in an image that can compile
it; each built variant comes back through the private staging repository, is verified
against its own metadata.json (every file's digest) and lands in build/<variant>/ as if built
here (state `built-remote`). Failed, cancelled and unavailable variants are recorded as a
local build records them, so `--only-failed` rebuilds just those."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from publisher import state
from publisher.builder.metadata import check_variant
from publisher.builder.scheduler import VariantResult, failed_in_report
from publisher.builder.stage import BuildRun
from publisher.errors import UsageError
from publisher.options import BuildCommandOptions
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.plan.planner import make_plan, select
from publisher.project.load import require_project
from publisher.remote import place as places
from publisher.remote.bundle import make_run_folder
from publisher.remote.images import image_for
from publisher.remote.request import JobRequest
from publisher.remote.runner import JobOutcome, JobPlan
from publisher.remote.stage import RemoteTestOptions, _Lines, estimate

Sink = Callable[[str], None]


def run_remote_build(options: BuildCommandOptions, remote: RemoteTestOptions, max_parallel: int | None,
                     note: Sink) -> BuildRun:
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
    runner = places.load_module(remote.place).make_runner(remote.place.targets, remote.remote)
    [target] = runner.targets([], any_backend=True)
    plans, results = [], []
    for planned in chosen:
        image = remote.remote.image or image_for(planned.name, build=True)
        if image is None:
            results.append(VariantResult(planned.name, "unavailable",
                                         reason="publisher knows no image for this variant's torch; pass --image"))
            continue
        request = JobRequest(kind="build", variants=(planned.name,),
                             matrix="matrix.yaml" if options.matrix_file else None)
        plans.append(JobPlan(key=planned.name, target=target, image=image, request=request))
    if plans:
        note(f"building on {runner.place_name}: {len(plans)} job(s), at most {max_parallel or len(plans)} at once")
        for line in estimate(plans, remote.remote.job_timeout):
            note(line)
        build_dir.mkdir(parents=True, exist_ok=True)
        fetched: dict[str, VariantResult] = {}
        with tempfile.TemporaryDirectory(prefix="publisher-run-") as tmp:
            folder = make_run_folder(Path(tmp) / "run", project.root, build_dir, [], {p.key: p.request for p in plans},
                                     options.matrix_file)
            outcomes = runner.run(plans, folder, _Lines(note), max_parallel=max_parallel, upload=True,
                                  collect=lambda outcome, staged: fetched.update(_collect(outcome, staged, build_dir,
                                                                                           remote, note)))
        for outcome in outcomes:
            name = outcome.plan.request.variants[0]
            results.append(fetched.get(name) or _failed(outcome, name))
    state.update_report(state.build_report_path(build_dir), {r.variant: r.report_entry() for r in results})
    return BuildRun(build_dir, tuple(results))


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
    """The variant the job sent, verified and moved into build/<variant>/; {} when there is none."""
    name = outcome.plan.request.variants[0]
    commit = ((outcome.payload or {}).get("uploaded") or {}).get(name)
    if not commit:
        return {}
    entry = _job_result(outcome, name)
    where = f"{remote.place.info.key} {outcome.plan.target.name} job {outcome.job_id}"
    with tempfile.TemporaryDirectory(prefix="publisher-fetch-", dir=build_dir) as tmp:
        prefix = f"{staged.path}/out/{name}"
        staged.api.snapshot_download(repo_id=staged.repo, repo_type="model", revision=commit,
                                     allow_patterns=[f"{prefix}/**"], local_dir=tmp)
        got = Path(tmp) / prefix
        check = check_variant(got)
        if not check.ok:
            return {name: VariantResult(name, "failed", error=f"{where}: the variant that came back does not match its "
                                        f"metadata.json: {'; '.join(check.problems[:3])}", source=where)}
        target = build_dir / name
        aside = Path(tmp) / "previous"
        if target.exists():
            target.rename(aside)
        shutil.move(str(got), str(target))
    note(f"{name}: fetched from {where}, every file's digest checked")
    return {name: VariantResult(name, "built-remote", seconds=entry.get("seconds") or outcome.seconds or 0.0,
                                fingerprint=state.variant_fingerprint(target), inputs=entry.get("inputs"),
                                source=where, backend="local", toolchain=entry.get("toolchain") or {}, at=time.time())}
