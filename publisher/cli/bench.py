"""`publisher bench PATH`: run the project's benchmarks (the form `kernels benchmark`
runs) against the built variants, here or on Hugging Face Jobs (--on); results per
device in build/.publisher/bench/, shown on the card by `push`. The stage is
publisher/bench/stage.py; this module parses and renders."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from publisher.bench.stage import BenchOptions, render_table, run_bench
from publisher.cli.common import remote_options
from publisher.errors import EXIT_FAILED, EXIT_OK


@click.command("bench")
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False), default=".")
@click.option("--variant", "include", multiple=True, metavar="GLOB", help="Only variants matching GLOB (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out variants matching GLOB (repeatable).")
@click.option("--warmup", type=click.IntRange(0, 10000), default=10, show_default=True, help="Untimed calls first.")
@click.option("--iterations", type=click.IntRange(1, 100000), default=100, show_default=True, help="Timed calls.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of a table.")
@remote_options()
def command(path: Path, include, skip, warmup, iterations, as_json, on, image, job_timeout, staging_repo) -> int:
    """Benchmark the variants built in PATH/build/ with the project's benchmarks/benchmark*.py."""
    options = BenchOptions(path=path, include=tuple(include), skip=tuple(skip), warmup=warmup, iterations=iterations)
    progress = lambda line: click.echo(line, err=True)  # noqa: E731
    if on:
        from publisher.remote.place import parse_place
        from publisher.remote.runner import RemoteOptions
        from publisher.remote.stage import RemoteTestOptions, run_remote_bench

        results = run_remote_bench(options, RemoteTestOptions(parse_place(on), RemoteOptions(
            job_timeout=job_timeout, image=image, staging_repo=staging_repo)), on_progress=progress)
    else:
        results = run_bench(options, on_progress=progress)
    if as_json:
        click.echo(json.dumps([asdict(r) for r in results], indent=2))
    else:
        click.echo(render_table(results))
    return EXIT_OK if results and all(r.status != "error" for r in results) else EXIT_FAILED
