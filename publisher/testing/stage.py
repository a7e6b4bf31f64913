"""The test stage as one call: pick the built variants, test each in its
environment, record the results in the test report. Used by `publisher
test` (run_project_tests) and `publisher release` (run_tests)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from publisher import state
from publisher.builder.metadata import check_variant
from publisher.errors import PublisherError, ToolchainUnavailable, UsageError
from publisher.options import TestCommandOptions
from publisher.plan import selection
from publisher.plan.planner import PlannedVariant
from publisher.plan.variants import Variant
from publisher.project.load import require_project
from publisher.project.model import Project
from publisher.testing.callers import package_inputs
from publisher.testing.environment import select_environment
from publisher.testing.report import VariantTestResult
from publisher.testing.run_variant import TestOptions, VariantUnderTest, run_variant
from publisher.testing.test_depends import declared_test_depends, kernel_depends

Sink = Callable[[str], None]


@dataclass(frozen=True)
class TestRun:
    __test__ = False  # not a pytest test class

    results: tuple[VariantTestResult, ...]
    report_path: Path
    require_gpu: bool

    def blocking(self) -> list[VariantTestResult]:
        """Variants that make the run fail: failed, not testable, no test run,
        or only loaded because the hardware is missing (unless --allow-load-only)."""
        bad = {"failed", "error", "untested"} | ({"loaded-not-run"} if self.require_gpu else set())
        return [r for r in self.results if r.status in bad]

    @property
    def ok(self) -> bool:
        return not self.blocking()


def built_variants(build_dir: Path) -> list[str]:
    """Variant folders in build/ (anything with a parseable variant name)."""
    names = []
    for entry in sorted(Path(build_dir).iterdir()) if Path(build_dir).is_dir() else []:
        try:
            Variant.parse(entry.name)
        except ValueError:
            continue
        if entry.is_dir():
            names.append(entry.name)
    return names


def select_variants(names: Sequence[str], include: Sequence[str] = (), skip: Sequence[str] = ()) -> list[str]:
    chosen = selection.chosen(names, include, skip)
    if include and not chosen:
        raise UsageError(
            f"no built variant matches {' '.join(include)}",
            f"built variants: {', '.join(names) or 'none (run publisher build first)'}",
        )
    return chosen


def run_tests(
    project: Project,
    build_dir: Path,
    *,
    include: Sequence[str] = (),
    skip: Sequence[str] = (),
    options: TestOptions = TestOptions(),
    matrix_path: Path | None = None,
    on_progress: Sink = lambda line: None,
    on_output: Sink | None = None,
) -> TestRun:
    names = built_variants(build_dir)
    if not names:
        raise UsageError(f"{build_dir}: no built variants", f"run `publisher build {project.root}` first")
    selected = select_variants(names, include, skip)
    tests_dir = project.root / "tests" if project.root and (project.root / "tests").is_dir() else None
    repo_id = options.repo_id or project.config.general.hub_repo_id
    test_depends = declared_test_depends(project.root)

    @lru_cache(maxsize=1)
    def plan() -> dict[str, PlannedVariant]:
        from publisher.plan.matrix import find_matrix, load_matrix
        from publisher.plan.planner import make_plan

        return make_plan(project, load_matrix(find_matrix(project.root, matrix_path))).by_name()

    results = []
    for name in selected:
        variant_dir = Path(build_dir) / name
        on_progress(f"testing {name}")
        check = check_variant(variant_dir)
        if not check.ok:
            results.append(_not_testable(name, variant_dir, "the variant folder is not a valid build: " + "; ".join(check.problems[:3])))
        else:
            try:
                variant = Variant.parse(name)
                env = select_environment(variant, lambda name=name: plan().get(name),
                                         lambda line: on_progress("    " + line), test_depends,
                                         kernel_depends(variant_dir, variant.backend))
            except (PublisherError, ToolchainUnavailable) as err:
                reason = getattr(err, "reason", None) or getattr(err, "message", str(err))
                results.append(_not_testable(name, variant_dir, f"no test environment: {reason}",
                                             getattr(err, "hint", None) or ""))
            else:
                on_progress(f"  with {env.python} ({env.origin})")
                known = package_inputs(project, variant_dir, variant.backend) if tests_dir is None else {}
                target = VariantUnderTest(name, variant_dir, project.python_name, tests_dir, project.extension_name,
                                          known)
                results.append(run_variant(target, env, build_dir, replace(options, repo_id=repo_id), on_output))
        last = results[-1]
        on_progress(f"  {last.status}" + (f": {last.reason}" if last.reason else "") + (f"\n    fix: {last.fix}" if last.fix else ""))
        state.update_report(state.test_report_path(build_dir), {name: results[-1].entry()})
    return TestRun(tuple(results), state.test_report_path(build_dir), options.require_gpu)


def run_project_tests(options: TestCommandOptions, on_progress: Sink = lambda line: None,
                      on_output: Sink | None = None) -> TestRun:
    """`publisher test`: the project at options.path, its variants in options.variants_dir."""
    return run_tests(require_project(options.path), options.variants_dir, include=options.selection.include,
                     skip=options.selection.skip, options=options.tests, matrix_path=options.matrix_file,
                     on_progress=on_progress, on_output=on_output)


def _not_testable(name: str, variant_dir: Path, reason: str, fix: str = "") -> VariantTestResult:
    try:
        fingerprint = state.variant_fingerprint(variant_dir)
    except OSError:
        fingerprint = None
    return VariantTestResult(
        variant=name, status="error", fingerprint=fingerprint, on_hardware=False, reason=reason, fix=fix,
        time=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
