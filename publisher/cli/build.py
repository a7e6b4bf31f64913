"""`publisher build`: build the project's variants into build/<variant>/.
The stage is publisher/builder/stage.py; this module parses and renders."""

from __future__ import annotations

from pathlib import Path

import click

from publisher.backends import BACKENDS
from publisher.cli.common import json_flag, matrix_option, remote_options
from publisher.cli.views import build_with_progress, render_build
from publisher.options import BackendSettings, BuildCommandOptions, Selection


@click.command("build")
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@click.option("--local", "local", is_flag=True, help=("Build only the variants of the running Python's torch: its own flavour, and the cpu "
                    "variant of the same torch when the project declares cpu."))
@click.option("--variant", "include", multiple=True, metavar="GLOB", help="Build only variants matching GLOB.")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out variants matching GLOB.")
@click.option("--backend", "backend_name", type=click.Choice(list(BACKENDS)), default="local", show_default=True)
@click.option("--jobs", type=click.IntRange(min=1), help="Variants built at once (default: from cores and memory).")
@click.option("--cores", type=click.IntRange(min=1),
              help="Compiles per variant: jobs x cores slots, shared by the variants in flight and by nvcc's "
                   "architecture threads, capped by free memory.")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failed variant (default: keep going).")
@click.option("--only-failed", is_flag=True, help="Rebuild only the variants that failed last time.")
@click.option("--force", is_flag=True, help="Rebuild even when nothing changed.")
@click.option("--debug", is_flag=True, help="Keep debug info (no optimisation, no stripping).")
@click.option("--strict", is_flag=True, help="Treat ABI check violations as errors.")
@json_flag
@matrix_option
@click.option("--out", type=click.Path(path_type=Path), help="Build folder (default: PATH/build).")
@click.option("--base-image", help="docker: image the builder is made from (default: $PUBLISHER_DOCKER_BASE_IMAGE, else manylinux_2_28).")
@click.option("--ca-bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="docker: CA bundle for downloads inside the build (default: the host's).")
@click.option("--index-url", help="docker: package index for toolchains (default: the host's pip settings).")
@click.option("--extra-index-url", "extra_index_urls", multiple=True, help="docker: another package index.")
@click.option("--nix-bundle", is_flag=True, help="nix: build the flake's `bundle` once instead of one attribute per variant.")
@click.option("--repo", "repo_id", metavar="ORG/NAME",
              help="Hub repo whose version branch serves as a build cache (default: [general.hub] repo-id).")
@click.option("--no-hub-cache", is_flag=True, help="Compile every variant, even one the Hub holds with the same inputs.")
@click.option("--hub-cache-trust", "trust", multiple=True, metavar="ORG[/NAME]",
              help="Reuse binaries from this owner's repos (or this repo) too; your own and the Hub's trusted "
                   "kernel publishers are trusted already (also publisher.toml hub-cache-trust).")
@click.option("--endpoint", envvar="HF_ENDPOINT", help="Hub URL for the cache (default: HF_ENDPOINT, else huggingface.co).")
@remote_options(on_help="Build elsewhere: hf-jobs:FLAVOUR runs one Hugging Face Job per variant on that flavour "
                        "(e.g. hf-jobs:cpu-upgrade); each variant comes back verified into build/.",
                image_help="With --on: image of every build job (default: PyTorch's public -devel image for each "
                           "variant's torch and CUDA).")
@click.option("--max-parallel", type=click.IntRange(min=1), help="With --on: jobs running at once (default: all).")
@click.option("--one-job-per", "per", type=click.Choice(["variant", "image"]),
              help="With --on: one job per variant (the place's default), or one per image for the variants "
                   "sharing it (one image pull for them).")
def command(path, local, include, skip, backend_name, jobs, cores, fail_fast, only_failed, force, debug, strict,
            as_json, matrix_file, out, base_image, ca_bundle, index_url, extra_index_urls, nix_bundle,
            repo_id, no_hub_cache, trust, endpoint, on, image, job_timeout, staging_repo, max_parallel, per) -> int:
    """Build the variants of the kernel project at PATH."""
    options = BuildCommandOptions(
        path=path, selection=Selection(tuple(include), tuple(skip)), local=local, backend=backend_name,
        settings=BackendSettings(base_image=base_image, ca_bundle=ca_bundle, index_url=index_url,
                                 extra_index_urls=tuple(extra_index_urls), matrix_file=matrix_file,
                                 nix_bundle=nix_bundle),
        jobs=jobs, cores=cores, fail_fast=fail_fast, only_failed=only_failed, force=force, debug=debug, strict=strict,
        matrix_file=matrix_file, out=out, repo_id=repo_id, hub_cache=not no_hub_cache,
        hub_cache_trust=tuple(trust), endpoint=endpoint)
    if on:
        from publisher.remote.build import run_remote_build
        from publisher.remote.place import parse_place
        from publisher.remote.runner import RemoteOptions
        from publisher.remote.stage import RemoteTestOptions

        if local:
            raise click.UsageError("--local and --on exclude each other: --on builds the matrix's variants elsewhere")
        ignored = [flag for flag, given in (("--backend " + backend_name, backend_name != "local"), ("--debug", debug),
                                            ("--strict", strict), ("--jobs", jobs), ("--cores", cores)) if given]
        if ignored:
            raise click.UsageError(f"{', '.join(ignored)}: not with --on (each job builds its variant with the local "
                                   "backend, optimised, on the flavour's cores)")
        remote = RemoteTestOptions(parse_place(on), RemoteOptions(endpoint=endpoint, job_timeout=job_timeout,
                                                                  image=image, staging_repo=staging_repo))
        run = run_remote_build(options, remote, max_parallel, note=lambda line: click.echo(line, err=True), per=per)
        return render_build(run, as_json)
    if max_parallel or per:
        raise click.UsageError("--max-parallel and --one-job-per go with --on PLACE:FLAVOUR")
    return render_build(build_with_progress(options, as_json), as_json)
