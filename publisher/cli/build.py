"""`publisher build`: build the project's variants into build/<variant>/."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from publisher import state
from publisher.backends import BACKENDS, get_backend
from publisher.builder.backend import BuildOptions
from publisher.builder.hub_cache import HubCache
from publisher.builder.scheduler import Scheduler, default_budget, failed_in_report
from publisher.cli.common import echo_json, json_flag, matrix_option
from publisher.errors import EXIT_FAILED, UsageError
from publisher.push.hub_client import is_repo_id
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.plan.planner import local_plan, make_plan, select
from publisher.project.load import require_project
from publisher.secrets import redact
from publisher.ui import PlainLines, make_progress, render_summary


@click.command("build")
@click.argument("path", type=click.Path(path_type=Path), default=Path("."))
@click.option("--local", "local", is_flag=True, help="Build only the variant of the running Python's torch.")
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
@click.option("--endpoint", envvar="HF_ENDPOINT", help="Hub URL for the cache (default: HF_ENDPOINT, else huggingface.co).")
def command(path, local, include, skip, backend_name, jobs, cores, fail_fast, only_failed, force, debug, strict,
            as_json, matrix_file, out, base_image, ca_bundle, index_url, extra_index_urls, nix_bundle,
            repo_id, no_hub_cache, endpoint) -> int:
    """Build the variants of the kernel project at PATH."""
    project = require_project(path)
    build_dir = (Path(out) if out else Path(path) / "build").resolve()
    matrix = load_matrix(find_matrix(project.root, matrix_file))
    plan = local_plan(project, matrix) if local else make_plan(project, matrix)
    chosen = select(plan, list(include), list(skip))
    for decision in plan.decisions:
        if decision.rule == "not-in-matrix":
            click.echo(f"warning: {decision.reason}; pass --matrix with a cell for it, or install a torch the matrix lists", err=True)
    if only_failed:
        failed = failed_in_report(build_dir)
        chosen = tuple(p for p in chosen if p.name in failed)
        if not chosen:
            click.echo("no failed variants to rebuild", err=True)
            return 0
    if not chosen:
        raise UsageError("no variant to build", f"run `publisher matrix {path}` to see why each cell is left out")
    jobs, cores = default_budget(chosen, jobs, cores)
    options = BuildOptions(debug=debug, jobs=jobs, cores=cores, strict=strict, force=force)
    backend = get_backend(backend_name, **_backend_settings(
        backend_name, project, matrix_file, base_image, ca_bundle, index_url, tuple(extra_index_urls), nix_bundle))
    progress = PlainLines(sys.stderr) if as_json else make_progress()
    hub_cache = None if no_hub_cache else _hub_cache(project, repo_id, endpoint)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        results = Scheduler(project, backend, build_dir, options, progress, fail_fast=fail_fast,
                            hub_cache=hub_cache).run(chosen)
    finally:
        signal.signal(signal.SIGTERM, previous)
        backend.close()
    rows = [r.as_dict() for r in results]
    if as_json:
        echo_json({"build_dir": str(build_dir), "report": str(state.build_report_path(build_dir)), "variants": rows})
    else:
        click.echo(render_summary(rows))
        click.echo(f"logs: {state.logs_dir(build_dir)}")
    # A requested variant that was not built (failed, cancelled, no toolchain) fails the command.
    return EXIT_FAILED if any(r.state not in ("built", "fetched", "cached") for r in results) else 0


def _backend_settings(name, project, matrix_file, base_image, ca_bundle, index_url, extra_index_urls,
                      nix_bundle) -> dict:
    """The options only one backend reads, for its constructor."""
    if name == "docker":
        return {"base_image": base_image, "ca_bundle": ca_bundle, "index_url": index_url,
                "extra_index_urls": extra_index_urls, "matrix_file": matrix_file}
    if name == "nix":
        return {"project": project, "bundle": nix_bundle}
    return {}


def _hub_cache(project, repo_id, endpoint) -> HubCache | None:
    """The version branch of the project's Hub repo, when there is one to read."""
    general = project.config.general
    source = "--repo" if repo_id else f"{project.build_toml} [general.hub] repo-id"
    repo_id = repo_id or general.hub_repo_id
    if not repo_id:
        return None
    if not is_repo_id(repo_id):
        raise UsageError(f"{source}: `{repo_id}` is not a Hub repo id",
                         "use ORG/NAME with letters, digits, '-', '_' and '.', or pass --no-hub-cache")
    branch = general.hub_branch or f"v{general.version}"
    return HubCache(repo_id, branch, endpoint, on_note=lambda note: click.echo(redact(note), err=True))


def _interrupt(signum, frame) -> None:
    """SIGTERM: stop like Ctrl-C (kill compilers, discard staging)."""
    raise KeyboardInterrupt
