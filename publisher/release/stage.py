"""The release pipeline as one stage: check -> plan (coverage) -> build -> test
-> gate -> push. It stops before the build when the selection lacks required
variants (unless --partial), and before the push when a selected variant
failed its tests (always) or ran no test on its hardware (unless
--allow-untested, or --allow-untested-variant for load-checked variants no
runner can test): the push gate's own rule (push/gate.standing), applied to
the test results in hand. Each step calls that stage and reports what it
did through ReleaseEvents; the command (publisher/cli/release.py) renders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from publisher.builder.stage import BuildRun
from publisher.errors import ProjectError
from publisher.findings import Finding, has_errors
from publisher.options import BuildCommandOptions, CheckOptions, ReleaseOptions
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.plan.planner import local_plan, make_plan, select
from publisher.project.load import require_project
from publisher.project.stage import CheckResult, run_check
from publisher.push import coverage
from publisher.push.gate import Standing, standing
from publisher.push.stage import PushEvents, PushResult, refusal, run_push, unloadable
from publisher.testing.report import VariantTestResult
from publisher.testing.stage import TestRun, run_tests


class ReleaseEvents(Protocol):
    """What a release tells its user as it goes."""

    push: PushEvents

    def step(self, title: str) -> None:
        """A step begins (check, build, test, push)."""

    def checked(self, result: CheckResult) -> None:
        """`check`'s findings."""

    def warning(self, finding_or_text: Finding | str) -> None:
        """Something the release goes on despite (a coverage gap under --partial, untested variants admitted)."""

    def build(self, options: BuildCommandOptions) -> BuildRun:
        """Run the build stage with this terminal's progress display; returns its result."""

    def built(self, run: BuildRun) -> None:
        """The build summary."""

    def progress(self, line: str) -> None:
        """A line of test progress."""

    def tested(self, run: TestRun) -> None:
        """The test table."""

    def pushed(self, result: PushResult) -> None:
        """Which environment loads which variant."""


@dataclass(frozen=True)
class ReleaseResult:
    build: BuildRun
    tests: TestRun
    push: PushResult
    admitted: tuple[VariantTestResult, ...]  # untested variants published because a flag said so


def _listing(results: Sequence[VariantTestResult]) -> str:
    return "\n".join(f"  {r.variant}: {r.status}" + (f" ({r.reason})" if r.reason else "") for r in results)


def untested_hint() -> str:
    return ("test them on their hardware (`publisher test --on hf-jobs:FLAVOR`, or on a machine that has it), or make "
            "the tests run; --allow-untested-variant GLOB admits matching 'loaded-not-run' variants (no runner can "
            "test them), --allow-untested all")


def judge_tests(run: TestRun, options: ReleaseOptions) -> tuple[VariantTestResult, ...]:
    """The untested variants a flag admits; raises ProjectError when the gate refuses any variant."""
    decided = {r.variant: standing(r.variant, r.entry(), options.allow_untested, options.load_only) for r in run.results}
    failed = [r for r in run.results if decided[r.variant] is Standing.FAILED]
    if failed:
        raise ProjectError(f"release stopped before the push: {len(failed)} variant(s) failed their tests:\n"
                           f"{_listing(failed)}", "fix the kernel and release again (--allow-untested does not override this)")
    untested = [r for r in run.results if decided[r.variant] is Standing.UNTESTED]
    if untested:
        raise ProjectError(f"release stopped before the push: {len(untested)} variant(s) ran no test on their "
                           f"hardware:\n{_listing(untested)}", untested_hint())
    return tuple(r for r in run.results if decided[r.variant] is Standing.ADMITTED)


def run_release(options: ReleaseOptions, events: ReleaseEvents) -> ReleaseResult:
    """options.build_on: build every variant in jobs there (--build-on hf-jobs:FLAVOUR); options.test_on: test
    the variants that need other hardware there (--test-on hf-jobs:...)."""
    path = options.path
    events.step("check")
    checked = run_check(CheckOptions(path=path, quiet=True, matrix_file=options.matrix_file))
    events.checked(checked)
    if has_errors(list(checked.findings)):
        raise ProjectError("release stopped: `publisher check` found errors", f"run `publisher check {path}`")
    project = require_project(path)
    matrix = load_matrix(find_matrix(project.root, options.matrix_file))
    plan = local_plan(project, matrix) if options.local else make_plan(project, matrix)
    chosen = select(plan, options.selection.include, options.selection.skip)
    gap = coverage.check(project, matrix, [p.name for p in chosen]).finding(options.partial, str(path))
    if gap is not None and gap.is_error:
        raise ProjectError(f"release stopped before the build: {gap.code} {gap.message}", gap.hint)
    if gap is not None:
        events.warning(gap)

    events.step("build")
    if options.build_on is not None:
        from publisher.remote.build import run_remote_build

        built = run_remote_build(options.build(), options.build_on, options.max_parallel, note=events.progress,
                                 per=options.jobs_per)
    else:
        built = events.build(options.build())
    events.built(built)
    if not built.ok:
        raise ProjectError("release stopped: some variants failed to build", "see the build summary above")

    events.step("test")
    if options.test_on is not None:
        from publisher.remote.stage import run_remote_tests

        tested = run_remote_tests(options.test(), options.test_on, on_progress=events.progress)
    else:
        tested = run_tests(project, Path(path) / "build", include=options.selection.include,
                           skip=options.selection.skip, matrix_path=options.matrix_file, options=options.tests,
                           on_progress=events.progress)
    events.tested(tested)
    admitted = judge_tests(tested, options)
    if admitted:
        events.warning(f"publishing {len(admitted)} variant(s) that ran no test on their hardware "
                       f"(--allow-untested / --allow-untested-variant):\n{_listing(admitted)}")

    events.step("push")
    pushed = run_push(options.push(), events.push)
    events.pushed(pushed)
    if pushed.refused:
        raise refusal(list(pushed.refused))
    failed = unloadable(pushed)
    if failed:
        raise failed
    return ReleaseResult(built, tested, pushed, admitted)
