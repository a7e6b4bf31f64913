"""`publisher test --on PLACE:TARGETS`: the selected variants that need an
accelerator one of the targets has are tested there, in one job per (target,
image); the others here, as `publisher test` tests them. The jobs' results
are merged into build/.publisher/test-report.json with the job, the target
and the GPU each job saw, before anything is published."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from publisher import state
from publisher.bench.results import VariantBench
from publisher.bench.stage import BenchRun, benchmark_scripts, file_results
from publisher.errors import UsageError
from publisher.options import BenchCommandOptions, TestCommandOptions
from publisher.plan.variants import Variant
from publisher.project.load import require_project
from publisher.remote import place as places
from publisher.remote.bundle import folder_size, make_run_folder
from publisher.remote.images import image_for
from publisher.remote.request import JobRequest
from publisher.remote.results import entries_from
from publisher.remote.runner import JobOutcome, JobPlan, RemoteOptions, Target
from publisher.testing.report import VariantTestResult
from publisher.testing.stage import TestRun, built_variants, run_tests, select_variants

Sink = Callable[[str], None]


@dataclass(frozen=True)
class RemoteTestOptions:
    place: places.Place
    remote: RemoteOptions = RemoteOptions()


class _Lines:
    """RemoteEvents as progress lines."""

    def __init__(self, sink: Sink, stream_logs: bool = True):
        self.sink = sink
        self.stream_logs = stream_logs

    def note(self, line: str) -> None:
        self.sink(line)

    def job_stage(self, outcome: JobOutcome) -> None:
        extra = f" ({outcome.message})" if outcome.message else ""
        url = f" {outcome.url}" if outcome.url and outcome.stage in ("SCHEDULING", "RUNNING") and not outcome.log else ""
        self.sink(f"[{outcome.plan.key}] job {outcome.job_id}: {outcome.stage}{extra}{url}")

    def job_line(self, outcome: JobOutcome, line: str) -> None:
        if self.stream_logs:
            self.sink(f"[{outcome.plan.key}] {line}")


def plan_jobs(variants: Sequence[str], targets: Sequence[Target], request: Callable[[tuple[str, ...]], JobRequest],
              image: str | None) -> tuple[list[JobPlan], dict[str, str]]:
    """One job per (target, image) for the variants of the target's backend; also the variants that have
    no image (variant -> why)."""
    plans: list[JobPlan] = []
    unplaced: dict[str, str] = {}
    for target in targets:
        by_image: dict[str, list[str]] = {}
        for name in variants:
            if Variant.parse(name).backend != target.backend:
                continue
            chosen = image or image_for(name)
            if chosen is None:
                unplaced[name] = "publisher knows no public image with this variant's torch and CUDA"
                continue
            by_image.setdefault(chosen, []).append(name)
        for n, (chosen, names) in enumerate(sorted(by_image.items()), 1):
            key = target.name if len(by_image) == 1 else f"{target.name}-{n}"
            plans.append(JobPlan(key=key, target=target, image=chosen, request=request(tuple(names))))
    return plans, unplaced


def estimate(plans: Sequence[JobPlan], job_timeout: float) -> list[str]:
    lines = []
    total = 0.0
    for plan in plans:
        t = plan.target
        price = f"${t.usd_per_hour:.2f}/h" if t.usd_per_hour is not None else "price unknown"
        lines.append(f"  job {plan.key}: {t.pretty} ({t.gpu or 'no GPU'}, {price}), {plan.image}: "
                     f"{', '.join(plan.request.variants)}")
        total += (t.usd_per_hour or 0.0) * job_timeout / 3600
    lines.append(f"  estimated cost: at most ${total:.2f} if every job ran to its timeout ({job_timeout / 60:g} min, "
                 "--job-timeout); billed per minute actually used")
    return lines


def _error_entry(fingerprint: str | None, reason: str, fix: str) -> dict:
    return {"status": "error", "fingerprint": fingerprint, "on_hardware": False, "device": {}, "tests": {},
            "suite": "", "smoke": [], "warnings": [], "seconds": 0.0, "output_tail": "", "time": "",
            "reason": reason, "fix": fix, "log": None}


def run_remote_tests(options: TestCommandOptions, remote: RemoteTestOptions, on_progress: Sink = lambda line: None,
                     on_output: Sink | None = None) -> TestRun:
    project = require_project(options.path)
    build_dir = options.variants_dir
    names = built_variants(build_dir)
    if not names:
        raise UsageError(f"{build_dir}: no built variants", f"run `publisher build {project.root}` first")
    selected = select_variants(names, options.selection.include, options.selection.skip)
    needing = sorted({Variant.parse(n).backend for n in selected})
    runner = places.load_module(remote.place).make_runner(remote.place.targets, remote.remote)
    targets = runner.targets(needing)
    reachable = {t.backend for t in targets}
    sent = [n for n in selected if Variant.parse(n).backend in reachable]
    here = [n for n in selected if n not in sent]

    results: list[VariantTestResult] = []
    if here:
        on_progress(f"testing here: {', '.join(here)}")
        results += run_tests(project, build_dir, include=here, options=options.tests, matrix_path=options.matrix_file,
                             on_progress=on_progress, on_output=on_output).results
    if not sent:
        on_progress(f"no selected variant needs {remote.place}: nothing was sent")
        return TestRun(tuple(results), state.test_report_path(build_dir), options.tests.require_gpu)

    t = options.tests
    make_request = lambda variants: JobRequest(  # noqa: E731
        kind="test", variants=variants, timeout=t.timeout, test_timeout=t.test_timeout, all_tests=t.all_tests,
        repo_id=t.repo_id or project.config.general.hub_repo_id,
        matrix="matrix.yaml" if options.matrix_file else None)
    plans, unplaced = plan_jobs(sent, targets, make_request, remote.remote.image)
    fingerprints = {n: state.variant_fingerprint(Path(build_dir) / n) for n in sent}
    entries = {n: _error_entry(fingerprints[n], f"not tested on {remote.place}: {why}",
                               "name an image whose torch and CUDA load it with --image")
               for n, why in unplaced.items()}
    if plans:
        on_progress(f"testing on {runner.place_name}: {len(plans)} job(s)")
        for line in estimate(plans, remote.remote.job_timeout):
            on_progress(line)
        with tempfile.TemporaryDirectory(prefix="publisher-run-") as tmp:
            variants = sorted({v for p in plans for v in p.request.variants})
            folder = make_run_folder(Path(tmp) / "run", project.root, build_dir, variants,
                                     {p.key: p.request for p in plans}, options.matrix_file)
            on_progress(f"  run folder: {folder_size(folder) / 1e6:.1f} MB")
            outcomes = runner.run(plans, folder, _Lines(on_progress))
        entries.update(entries_from(remote.place.info.key, outcomes, fingerprints))
    state.update_report(state.test_report_path(build_dir), entries)
    for name in sent:
        result = VariantTestResult.from_entry(name, entries[name])
        on_progress(f"  {name}: {result.status}" + (f": {result.reason}" if result.reason else "")
                    + (f"\n    fix: {result.fix}" if result.fix else ""))
        results.append(result)
    order = {n: i for i, n in enumerate(selected)}
    results.sort(key=lambda r: order.get(r.variant, 0))
    return TestRun(tuple(results), state.test_report_path(build_dir), options.tests.require_gpu)


def run_remote_bench(options: BenchCommandOptions, remote: RemoteTestOptions,
                     on_progress: Sink = lambda line: None) -> BenchRun:
    """`publisher bench --on PLACE:TARGETS`: the selected variants of each target's backend are benchmarked
    in one job per (target, image), by the same bench stage a local run uses; each job's results are filed
    per device as a local run files them, with the job, the place and the flavour."""
    project = require_project(options.path)
    build_dir = options.variants_dir
    benchmark_scripts(project)  # no benchmarks: said before anything is sent
    names = built_variants(build_dir)
    if not names:
        raise UsageError(f"{build_dir}: no built variants", f"run `publisher build {project.root}` first")
    selected = select_variants(names, options.selection.include, options.selection.skip)
    runner = places.load_module(remote.place).make_runner(remote.place.targets, remote.remote)
    targets = runner.targets(sorted({Variant.parse(n).backend for n in selected}))
    reachable = {t.backend for t in targets}
    b = options.bench
    make_request = lambda variants: JobRequest(  # noqa: E731
        kind="bench", variants=variants, timeout=b.timeout, repo_id=b.repo_id or project.config.general.hub_repo_id,
        matrix="matrix.yaml" if options.matrix_file else None,
        extra={"warmup": b.warmup, "iterations": b.iterations})
    plans, unplaced = plan_jobs([n for n in selected if Variant.parse(n).backend in reachable], targets, make_request,
                                remote.remote.image)
    unplaced.update({n: f"no target of {remote.place} runs {Variant.parse(n).backend} variants (benchmark it where its "
                        "hardware is, without --on)" for n in selected if Variant.parse(n).backend not in reachable})
    results = [_bench_result(build_dir, n, "skipped", f"not sent to {remote.place}: {why}") for n, why in unplaced.items()]
    if plans:
        on_progress(f"benchmarking on {runner.place_name}: {len(plans)} job(s)")
        for line in estimate(plans, remote.remote.job_timeout):
            on_progress(line)
        with tempfile.TemporaryDirectory(prefix="publisher-run-") as tmp:
            variants = sorted({v for p in plans for v in p.request.variants})
            folder = make_run_folder(Path(tmp) / "run", project.root, build_dir, variants,
                                     {p.key: p.request for p in plans}, options.matrix_file)
            outcomes = runner.run(plans, folder, _Lines(on_progress))
        results += [r for outcome in outcomes for r in _bench_outcome(build_dir, outcome, remote.place)]
    else:
        on_progress(f"no selected variant runs on {remote.place}")
    order = {n: i for i, n in enumerate(selected)}
    results.sort(key=lambda r: order.get(r.variant, 0))
    return file_results(build_dir, results)


def _bench_result(build_dir: Path, name: str, status: str, reason: str) -> VariantBench:
    try:
        fingerprint = state.variant_fingerprint(Path(build_dir) / name)
    except OSError:
        fingerprint = None
    return VariantBench(variant=name, status=status, fingerprint=fingerprint, time="", reason=reason)


def _bench_outcome(build_dir: Path, outcome: JobOutcome, place: places.Place) -> list[VariantBench]:
    """What one job sent back, per variant: its result (taken only for the very build sent), or why there is none."""
    payload = outcome.payload or {}
    sent = payload.get("results") if payload.get("ok") and isinstance(payload.get("results"), dict) else {}
    results = []
    for name in outcome.plan.request.variants:
        data, local = sent.get(name), _bench_result(build_dir, name, "error", "")
        if not isinstance(data, dict):
            why = payload.get("error") or f"job {outcome.job_id} ended {outcome.stage} {outcome.message}".strip()
            results.append(replace(local, reason=f"{outcome.plan.target.name}: no result: {why}"))
        elif data.get("fingerprint") != local.fingerprint:
            results.append(replace(local, reason=f"job {outcome.job_id} benchmarked a different build"))
        else:
            result = VariantBench.from_report(name, data)
            where = {"place": place.info.key, "flavor": outcome.plan.target.name, "job": outcome.job_id}
            results.append(replace(result, device={**result.device, **where}) if result.device else result)
    return results
