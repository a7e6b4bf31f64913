"""`publisher init OWNER/NAME [PATH]`: a new kernel project that passes `check`
and whose tests pass once built; `publisher init --ci [PATH]`: only the release
workflow, for an existing project. The stage is publisher/scaffold/stage.py;
this module parses and renders."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import click

from publisher.cli.common import echo_json, json_flag
from publisher.errors import EXIT_OK
from publisher.options import DEFAULT_LICENSE, InitOptions
from publisher.scaffold.stage import InitResult, run_init
from publisher.scaffold.templates import DEFAULT_BACKENDS, OFFERED_BACKENDS


def _complete_backends(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    done, _, last = incomplete.rpartition(",")
    prefix = done + "," if done else ""
    return [prefix + b for b in (*OFFERED_BACKENDS, "all") if b.startswith(last) and b not in done.split(",")]


@click.command("init")
@click.argument("args", nargs=-1, metavar="OWNER/NAME [PATH]")
@click.option("--ci", is_flag=True, help="Only add .github/workflows/release.yml to the existing project in PATH.")
@click.option("--backends", multiple=True, metavar="LIST", shell_complete=_complete_backends,
              help=f"Backends to scaffold, comma-separated: {', '.join(OFFERED_BACKENDS)} or all "
                   f"(default: {','.join(DEFAULT_BACKENDS)}).")
@click.option("--license", "license_", metavar="ID", help=f"The kernel's license (default: {DEFAULT_LICENSE}).")
@click.option("--force", is_flag=True, help="Write into a non-empty folder, overwriting the files publisher init writes.")
@click.option("--workflow-ref", metavar="OWNER/REPO@REF",
              help="Call the reusable release workflow of this repository and ref (default: publisher's, at this release).")
@json_flag
def command(args: tuple[str, ...], ci: bool, backends: tuple[str, ...], license_: str | None, force: bool,
            workflow_ref: str | None, as_json: bool) -> int:
    """Create a kernel project for the Hub repository OWNER/NAME in PATH (default: NAME): build.toml,
    a torch binding, a small kernel per backend, tests, a benchmark, a card and a GitHub release workflow."""
    options = InitOptions.from_args(args, ci=ci, backends=backends, license=license_, force=force,
                                    workflow_ref=workflow_ref)
    return render(run_init(options), as_json)


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory where that is shorter."""
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else str(path)


def render(result: InitResult, as_json: bool) -> int:
    options, root = result.options, result.root
    if as_json:
        echo_json({
            "ok": True, "path": str(root.resolve()), "repo_id": result.repo_id,
            "name": options.names.name if options.names else None,
            "backends": list(options.backends) if options.names else None,
            "license": options.license if options.names else None,
            "files": [str(p.resolve()) for p in result.written],
            "overwritten": [str(p.resolve()) for p in result.overwritten],
            "workflow": str(result.workflow.resolve()), "tags": result.tag_pattern,
            "git_initialized": result.git_initialized,
        })
        return EXIT_OK
    folder = shlex.quote(_shown(root))
    if options.names is None:
        click.echo(f"wrote the release workflow of {result.repo_id}: {_shown(result.workflow)}")
    else:
        names = options.names
        click.echo(f"created {names.repo_id} in {_shown(root)}/ (kernel `{names.name}`, backends "
                   f"{', '.join(options.backends)}, license {options.license}):")
        for path in result.written:
            click.echo(f"  {_shown(path)}" + ("  (overwritten)" if path in result.overwritten else ""))
        if result.git_initialized:
            click.echo(f"  (and made {_shown(root)}/ a git repository: `git init`)")
        if result.outer_repository is not None:
            click.echo(f"\nnote: {_shown(root)}/ is inside the git repository {_shown(result.outer_repository)}, and GitHub "
                       "reads workflows only at the top of a repository: to release from there, "
                       f"`publisher init --ci {folder}` writes this project's workflow at the top "
                       f"(then remove {_shown(root)}/.github)")
        click.echo("\nnext:")
        click.echo(f"  publisher check {folder}")
        needs = "" if "cpu" in options.backends else "   # with a CUDA or ROCm torch; the tests need its GPU"
        click.echo(f"  publisher build {folder} --local && publisher test {folder}{needs}")
    click.echo(f"  on GitHub: add the secret HF_TOKEN (see the comments in {_shown(result.workflow)}); "
               f"a pushed tag {result.tag_pattern} (or a manual run) releases the kernel")
    return EXIT_OK
