"""`publisher release PATH --repo ORG/NAME`: check -> build -> test -> push,
stopping before the build when the selection lacks required variants (unless
--partial), and before the push when a selected variant failed its tests
(always) or did not run a test on its hardware (unless --allow-untested, or
--allow-untested-variant for load-checked variants no runner can test).
Each step calls that stage's function and renders it as its command does."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.cli import build as build_cli
from publisher.cli import check as check_cli
from publisher.cli import push as push_cli
from publisher.cli.common import matrix_option
from publisher.cli.test import echo_run, test_options
from publisher.errors import ProjectError
from publisher.findings import render_line
from publisher.options import CheckOptions, ReleaseOptions, Selection, TestOptions
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.plan.planner import local_plan, make_plan, select
from publisher.project.load import require_project
from publisher.project.stage import run_check
from publisher.push import coverage, gate
from publisher.push.stage import refusal, run_push
from publisher.testing.stage import run_tests

# Statuses that stop a release unless --allow-untested: nothing ran the
# variant's tests on its hardware. A failed variant always stops it.
_UNTESTED = ("error", "untested", "loaded-not-run")


def _step(title: str) -> None:
    click.secho(f"\n== {title}", bold=True, err=True)


@click.command("release")
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False), default=".")
@click.option("--repo", "repo", required=True, metavar="ORG/NAME", help="Hub kernel repo to publish to.")
@click.option("--local", is_flag=True, help=("Build only the variants of the running Python's torch: its own flavour, and the cpu "
                    "variant of the same torch when the project declares cpu."))
@click.option("--variant", "include", multiple=True, metavar="GLOB", help="Only variants matching GLOB (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out variants matching GLOB (repeatable).")
@click.option("--allow-untested", is_flag=True,
              help="Push variants that ran no test on their hardware (never ones that failed; not recommended).")
@click.option("--allow-untested-variant", "load_only", multiple=True, metavar="GLOB",
              help="Push matching variants no runner can test on their hardware once their import was checked "
                   "('loaded, not run'); never failed or crashed ones (repeatable).")
@click.option("--partial", is_flag=True, help="Release although the selection lacks required variants.")
@test_options
@matrix_option
@click.option("--endpoint", envvar="HF_ENDPOINT", help="Hub URL (default: HF_ENDPOINT, else huggingface.co).")
@click.option("--private", is_flag=True, help="Create the repo as private (when it does not exist).")
@click.option("--dry-run", is_flag=True, help="Stop at the push plan; change nothing on the Hub.")
@click.option("--no-hub-cache", is_flag=True, help="Compile every variant, even one --repo holds with the same inputs.")
def command(path: Path, repo: str, local: bool, include, skip, allow_untested: bool, load_only, partial: bool, repo_id,
            require_gpu, timeout, all_tests, test_timeout, matrix_file, endpoint, private, dry_run, no_hub_cache) -> int:
    """Check, build, test and publish the kernel project in PATH."""
    return release(ReleaseOptions(
        path=path, repo_id=repo, selection=Selection(tuple(include), tuple(skip)), local=local,
        allow_untested=allow_untested, load_only=tuple(load_only), partial=partial,
        tests=TestOptions(repo_id=repo_id, timeout=timeout, test_timeout=test_timeout, require_gpu=require_gpu,
                          all_tests=all_tests),
        matrix_file=matrix_file, endpoint=endpoint, private=private, dry_run=dry_run, hub_cache=not no_hub_cache))


def release(options: ReleaseOptions) -> int:
    path, include, skip = options.path, options.selection.include, options.selection.skip
    _step("check")
    if check_cli.render(run_check(CheckOptions(path=path, quiet=True, matrix_file=options.matrix_file)), "human"):
        raise ProjectError("release stopped: `publisher check` found errors", f"run `publisher check {path}`")
    project = require_project(path)
    matrix = load_matrix(find_matrix(project.root, options.matrix_file))
    chosen = select(local_plan(project, matrix) if options.local else make_plan(project, matrix), include, skip)
    gap = coverage.check(project, matrix, [p.name for p in chosen]).finding(options.partial, str(path))
    if gap is not None and gap.is_error:
        raise ProjectError(f"release stopped before the build: {gap.code} {gap.message}", gap.hint)
    if gap is not None:
        click.secho(f"warning: {render_line(gap)}", fg="yellow", err=True)

    _step("build")
    if build_cli.render(build_cli.build(options.build(), as_json=False), as_json=False):
        raise ProjectError("release stopped: some variants failed to build", "see the build summary above")

    _step("test")
    run = run_tests(project, Path(path) / "build", include=include, skip=skip, matrix_path=options.matrix_file,
                    options=options.tests, on_progress=lambda line: click.echo(line, err=True))
    echo_run(run, as_json=False)

    def listing(results) -> str:
        return "\n".join(f"  {r.variant}: {r.status}" + (f" ({r.reason})" if r.reason else "") for r in results)

    failed = [r for r in run.results if r.status == "failed"]
    if failed:
        raise ProjectError(f"release stopped before the push: {len(failed)} variant(s) failed their tests:\n"
                           f"{listing(failed)}", "fix the kernel and release again (--allow-untested does not override this)")
    untested = [r for r in run.results if r.status in _UNTESTED
                and not gate.admitted_load_only(r.variant, r.status, options.load_only)]
    if untested:
        if not options.allow_untested:
            raise ProjectError(
                f"release stopped before the push: {len(untested)} variant(s) ran no test on their hardware:\n{listing(untested)}",
                "test on the right hardware (scripts/gpu_test.sh), or make the tests run; --allow-untested-variant GLOB "
                "admits matching 'loaded-not-run' variants (no runner can test them), --allow-untested all",
            )
        click.secho(
            f"WARNING: --allow-untested: publishing {len(untested)} variant(s) that ran no test on their hardware:\n{listing(untested)}",
            fg="red", bold=True, err=True,
        )

    _step("push")
    result = run_push(options.push(), push_cli.PushView(as_json=False))
    push_cli.render(result, as_json=False)
    if result.refused:
        raise refusal(list(result.refused))
    return 0
