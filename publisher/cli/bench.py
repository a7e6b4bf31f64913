"""`publisher bench PATH`: run the project's benchmarks/benchmark*.py (the
scripts `kernels benchmark` runs) against every built variant this machine can
run, or in remote jobs (--on), and file the results per device. The stages are
publisher/bench/stage.py and publisher/remote/stage.py; this module parses and
renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.bench.stage import run_project_benchmarks
from publisher.cli.common import remote_options
from publisher.cli.views import render_bench_run
from publisher.errors import EXIT_FAILED, EXIT_OK
from publisher.options import BenchCommandOptions, BenchOptions, Selection


@click.command("bench")
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False), default=".")
@click.option("--variant", "include", multiple=True, metavar="GLOB", help="Only variants matching GLOB (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out variants matching GLOB (repeatable).")
@click.option("--warmup", type=int, default=10, show_default=True, help="Calls of each workload (and its reference) "
              "before timing.")
@click.option("--iterations", type=int, default=100, show_default=True,
              help="Timed samples of each workload and of its reference (a sample: calls for about 2 ms).")
@click.option("--timeout", type=float, default=1800, show_default=True, help="Seconds for all benchmarks of one variant.")
@click.option("--repo-id", help="Repo id for benchmarks that load the kernel themselves with get_kernel "
              "(default: [general.hub] repo-id).")
@click.option("--build-dir", type=click.Path(path_type=Path, file_okay=False), help="Build folder (default: PATH/build).")
@click.option("--matrix", "matrix_file", type=click.Path(path_type=Path), help="Matrix file naming the variants' toolchains.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of a table.")
@click.option("-v", "--verbose", is_flag=True, help="Stream the benchmarks' output.")
@remote_options()
def command(path: Path, include, skip, warmup, iterations, timeout, repo_id, build_dir, matrix_file, as_json,
            verbose, on, image, job_timeout, staging_repo) -> int:
    """Benchmark the variants built in PATH/build/; results per device in build/.publisher/bench/."""
    options = BenchCommandOptions(
        path=path, selection=Selection(tuple(include), tuple(skip)),
        bench=BenchOptions(warmup=warmup, iterations=iterations, timeout=timeout, repo_id=repo_id),
        build_dir=build_dir, matrix_file=matrix_file)
    progress = lambda line: click.echo(line, err=True)  # noqa: E731
    if on:
        from publisher.remote.place import parse_place
        from publisher.remote.runner import RemoteOptions
        from publisher.remote.stage import RemoteTestOptions, run_remote_bench

        run = run_remote_bench(options, RemoteTestOptions(parse_place(on), RemoteOptions(
            job_timeout=job_timeout, image=image, staging_repo=staging_repo)), on_progress=progress)
    else:
        run = run_project_benchmarks(options, on_progress=progress, on_output=progress if verbose else None)
    render_bench_run(run, as_json)
    return EXIT_OK if run.ok else EXIT_FAILED
