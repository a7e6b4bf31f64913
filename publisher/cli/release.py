"""`publisher release PATH --repo ORG/NAME`: check -> build -> test -> push.
The stage is publisher/release/stage.py (which steps, and what stops the
release); this module parses and renders each step as its own command does."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.builder.stage import BuildRun
from publisher.cli.common import matrix_option, remote_options, test_options
from publisher.cli.views import PushView, build_with_progress, render_build, render_check, render_push, render_test_run
from publisher.findings import Finding, render_line
from publisher.options import BuildCommandOptions, ReleaseOptions, Selection, TestOptions
from publisher.project.stage import CheckResult
from publisher.push.stage import PushResult
from publisher.release.stage import run_release
from publisher.testing.stage import TestRun


class ReleaseView:
    """ReleaseEvents for a terminal: step titles and notes on stderr, each stage's result as its command shows it."""

    push = PushView(as_json=False)

    def step(self, title: str) -> None:
        click.secho(f"\n== {title}", bold=True, err=True)

    def checked(self, result: CheckResult) -> None:
        render_check(result, "human")

    def warning(self, finding_or_text: Finding | str) -> None:
        if isinstance(finding_or_text, Finding):
            click.secho(f"warning: {render_line(finding_or_text)}", fg="yellow", err=True)
        else:
            click.secho(f"WARNING: {finding_or_text}", fg="red", bold=True, err=True)

    def build(self, options: BuildCommandOptions) -> BuildRun:
        return build_with_progress(options, as_json=False)

    def built(self, run: BuildRun) -> None:
        render_build(run, as_json=False)

    def progress(self, line: str) -> None:
        click.echo(line, err=True)

    def tested(self, run: TestRun) -> None:
        render_test_run(run, as_json=False)

    def pushed(self, result: PushResult) -> None:
        render_push(result, as_json=False)


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
@click.option("--allow-api-change", is_flag=True,
              help="Release although a function, layer or op schema the version branch holds was removed or changed.")
@test_options
@matrix_option
@click.option("--endpoint", envvar="HF_ENDPOINT", help="Hub URL (default: HF_ENDPOINT, else huggingface.co).")
@click.option("--private", is_flag=True, help="Create the repo as private (when it does not exist).")
@click.option("--dry-run", is_flag=True, help="Stop at the push plan; change nothing on the Hub.")
@click.option("--no-hub-cache", is_flag=True, help="Compile every variant, even one --repo holds with the same inputs.")
@remote_options("--test-on", image_help="With --test-on: image of every test job (default: PyTorch's public image "
                                        "for each variant's torch and CUDA).")
@click.option("--build-on", metavar="PLACE:FLAVOUR",
              help="Build the variants elsewhere: hf-jobs:FLAVOUR runs one Hugging Face Job per variant "
                   "(e.g. hf-jobs:cpu-xl); each comes back verified into build/ before the tests.")
@click.option("--build-image", help="With --build-on: image of every build job (default: PyTorch's public -devel "
                                    "image for each variant's torch and CUDA).")
@click.option("--max-parallel", type=click.IntRange(min=1), help="With --build-on: build jobs running at once "
                                                                 "(default: all).")
@click.option("--one-job-per", "per", type=click.Choice(["variant", "image"]),
              help="With --build-on: one build job per variant (the place's default), or one per image.")
def command(path: Path, repo: str, local: bool, include, skip, allow_untested: bool, load_only, partial: bool,
            allow_api_change: bool, repo_id,
            require_gpu, timeout, all_tests, test_timeout, matrix_file, endpoint, private, dry_run, no_hub_cache,
            on, image, job_timeout, staging_repo, build_on, build_image, max_parallel, per) -> int:
    """Check, build, test and publish the kernel project in PATH."""
    test_on = build_place = None
    if build_on and local:
        raise click.UsageError("--local and --build-on exclude each other: --build-on builds the matrix's variants "
                               "elsewhere")
    if (build_image or max_parallel or per) and not build_on:
        raise click.UsageError("--build-image, --max-parallel and --one-job-per go with --build-on PLACE:FLAVOUR")
    if on or build_on:
        from publisher.remote.place import parse_place
        from publisher.remote.runner import RemoteOptions
        from publisher.remote.stage import RemoteTestOptions

        if on:
            test_on = RemoteTestOptions(parse_place(on, "--test-on"), RemoteOptions(
                endpoint=endpoint, job_timeout=job_timeout, image=image, staging_repo=staging_repo))
        if build_on:
            build_place = RemoteTestOptions(parse_place(build_on, "--build-on"), RemoteOptions(
                endpoint=endpoint, job_timeout=job_timeout, image=build_image, staging_repo=staging_repo))
    run_release(ReleaseOptions(
        path=path, repo_id=repo, selection=Selection(tuple(include), tuple(skip)), local=local,
        allow_untested=allow_untested, load_only=tuple(load_only), partial=partial,
        tests=TestOptions(repo_id=repo_id, timeout=timeout, test_timeout=test_timeout, require_gpu=require_gpu,
                          all_tests=all_tests),
        matrix_file=matrix_file, endpoint=endpoint, private=private, dry_run=dry_run, hub_cache=not no_hub_cache,
        test_on=test_on, build_on=build_place, max_parallel=max_parallel, jobs_per=per,
        allow_api_change=allow_api_change),
        ReleaseView())
    return 0
