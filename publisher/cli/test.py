"""`publisher test PATH`: run every built variant's tests in its own
environment, on its hardware where this machine has it. The stage is
publisher/testing/stage.py; this module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.cli.common import echo_json
from publisher.errors import EXIT_FAILED, EXIT_OK
from publisher.options import Selection, TestCommandOptions, TestOptions
from publisher.testing.report import render_table
from publisher.testing.stage import TestRun, run_project_tests


def test_options(f):
    """Options `test` and `release` share."""
    for option in reversed([
        click.option("--repo-id", help="Repo id the project's tests load with get_kernel "
                     "(default: [general.hub] repo-id, else the one the tests name)."),
        click.option("--require-gpu/--allow-load-only", default=True, show_default=True,
                     help="A variant whose accelerator is missing here is loaded and its ops checked ('loaded, not run'); "
                          "that fails the run unless --allow-load-only."),
        click.option("--timeout", type=float, default=1800, show_default=True, help="Seconds for all tests of one variant."),
        click.option("--all-tests", is_flag=True, help="Run all of tests/, not only the tests marked kernels_ci."),
        click.option("--test-timeout", type=float, default=300, show_default=True,
                     help="Seconds for one test (needs pytest-timeout in the environment)."),
    ]):
        f = option(f)
    return f


def echo_run(run: TestRun, as_json: bool) -> None:
    if as_json:
        echo_json({
            "ok": run.ok,
            "report": str(run.report_path),
            "variants": {r.variant: r.entry() for r in run.results},
        })
        return
    click.echo(render_table(list(run.results)))
    for r in run.blocking():
        if r.output_tail:
            click.echo(f"\n--- {r.variant}: {r.status} — last lines of output (full log: {r.log}) ---")
            click.echo(r.output_tail)
    click.echo(f"\nreport: {run.report_path}")


@click.command("test")
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False), default=".")
@click.option("--variant", "include", multiple=True, metavar="GLOB", help="Only variants matching GLOB (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out variants matching GLOB (repeatable).")
@test_options
@click.option("--build-dir", type=click.Path(path_type=Path, file_okay=False), help="Build folder (default: PATH/build).")
@click.option("--matrix", "matrix_file", type=click.Path(path_type=Path), help="Matrix file naming the variants' toolchains.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of a table.")
@click.option("-v", "--verbose", is_flag=True, help="Stream the tests' output.")
def command(path: Path, include, skip, repo_id, require_gpu, timeout, all_tests, test_timeout, build_dir, matrix_file,
            as_json, verbose) -> int:
    """Test the variants built in PATH/build/ and record the results."""
    options = TestCommandOptions(
        path=path, selection=Selection(tuple(include), tuple(skip)),
        tests=TestOptions(repo_id=repo_id, timeout=timeout, test_timeout=test_timeout, require_gpu=require_gpu,
                          all_tests=all_tests),
        build_dir=build_dir, matrix_file=matrix_file)
    run = run_project_tests(options, on_progress=lambda line: click.echo(line, err=True),
                            on_output=(lambda line: click.echo(line, err=True)) if verbose else None)
    echo_run(run, as_json)
    return EXIT_OK if run.ok else EXIT_FAILED
