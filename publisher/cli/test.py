"""`publisher test PATH`: run every built variant's tests in its own
environment, on its hardware where this machine has it. The stage is
publisher/testing/stage.py; this module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.cli.common import remote_options, test_options
from publisher.cli.views import render_test_run
from publisher.errors import EXIT_FAILED, EXIT_OK
from publisher.options import Selection, TestCommandOptions, TestOptions
from publisher.remote.place import parse_place
from publisher.remote.runner import RemoteOptions
from publisher.testing.stage import run_project_tests


@click.command("test")
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False), default=".")
@click.option("--variant", "include", multiple=True, metavar="GLOB", help="Only variants matching GLOB (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out variants matching GLOB (repeatable).")
@test_options
@click.option("--build-dir", type=click.Path(path_type=Path, file_okay=False), help="Build folder (default: PATH/build).")
@click.option("--matrix", "matrix_file", type=click.Path(path_type=Path), help="Matrix file naming the variants' toolchains.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of a table.")
@click.option("-v", "--verbose", is_flag=True, help="Stream the tests' output.")
@remote_options()
def command(path: Path, include, skip, repo_id, require_gpu, timeout, all_tests, test_timeout, build_dir, matrix_file,
            as_json, verbose, on, image, job_timeout, staging_repo) -> int:
    """Test the variants built in PATH/build/ and record the results."""
    options = TestCommandOptions(
        path=path, selection=Selection(tuple(include), tuple(skip)),
        tests=TestOptions(repo_id=repo_id, timeout=timeout, test_timeout=test_timeout, require_gpu=require_gpu,
                          all_tests=all_tests),
        build_dir=build_dir, matrix_file=matrix_file)
    progress = lambda line: click.echo(line, err=True)  # noqa: E731
    output = progress if verbose else None
    if on:
        from publisher.remote.stage import RemoteTestOptions, run_remote_tests

        remote = RemoteTestOptions(parse_place(on), RemoteOptions(job_timeout=job_timeout, image=image,
                                                                  staging_repo=staging_repo))
        run = run_remote_tests(options, remote, on_progress=progress, on_output=output)
    else:
        run = run_project_tests(options, on_progress=progress, on_output=output)
    render_test_run(run, as_json)
    return EXIT_OK if run.ok else EXIT_FAILED
