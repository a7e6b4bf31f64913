"""`publisher push [REPO_ID] [PATH]`: publish the variants built in PATH/build/
to a Hub kernel repo as one verified commit on the version branch, and the
kernel card to main. The stage is publisher/push/stage.py; this module parses
and renders."""

from __future__ import annotations

import click

from publisher.cli.common import matrix_option
from publisher.cli.views import PushView, render_push
from publisher.options import PushOptions, Selection
from publisher.push.stage import refusal, run_push, unloadable


@click.command("push")
@click.argument("args", nargs=-1, metavar="[REPO_ID] [PATH]")
@click.option("--private", is_flag=True, help="Create the repo as private (when it does not exist).")
@click.option("--dry-run", is_flag=True, help="Print the plan (per variant: added, deleted, unchanged, bytes); change nothing.")
@click.option("--create-pr", is_flag=True, help="Open pull requests instead of committing to the branches.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report.")
@click.option("--endpoint", envvar="HF_ENDPOINT", help="Hub URL (default: HF_ENDPOINT, else huggingface.co).")
@click.option("--allow-untested", is_flag=True,
              help="Publish variants that were not tested on their hardware or ran no test (never ones that failed).")
@click.option("--allow-untested-variant", "load_only", multiple=True, metavar="GLOB",
              help="Publish matching variants that no runner can test on their hardware once their import was checked "
                   "(`publisher test --allow-load-only`: 'loaded, not run'); never failed or crashed ones (repeatable).")
@click.option("--partial", is_flag=True,
              help="Publish although required variants are missing; the card and the resolution table list them.")
@click.option("--allow-api-change", is_flag=True,
              help="Publish although a function, layer or op schema the version branch holds was removed or changed "
                   "(callers of this version break; bumping `version` in build.toml is the usual way).")
@matrix_option
@click.option("--variant", "include", multiple=True, metavar="GLOB", help="Only variants matching GLOB (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out variants matching GLOB (repeatable).")
@click.option("--branch", help="Branch to publish to (default: [general.hub] branch, else v<version>).")
@click.option("--no-card", is_flag=True, help="Do not update README.md on main.")
@click.option("--signer-workflow", envvar="GITHUB_WORKFLOW_REF", metavar="OWNER/REPO/.github/workflows/FILE@REF",
              help="The workflow that signed the variants, for the card's verification policy (default: GITHUB_WORKFLOW_REF).")
def command(args, private, dry_run, create_pr, as_json, endpoint, allow_untested, load_only, partial, allow_api_change,
            matrix_file, include, skip, branch, no_card, signer_workflow) -> int:
    """Publish the built variants of the project at PATH (default .) to REPO_ID
    (default [general.hub] repo-id) as one verified commit.

    \b
    Exit codes: 0 published (or nothing to change), 1 refused or failed before
    anything was published, 2 usage error, 3 the Hub could not be reached,
    4 the version branch was committed and verified but a later step failed:
    the card on main (run the push again), or loading the published version
    as a consumer does, exactly as the card says (PP401: fix what it names)."""
    options = PushOptions.from_args(
        args, signer_workflow=signer_workflow, selection=Selection(tuple(include), tuple(skip)), private=private,
        dry_run=dry_run, create_pr=create_pr, endpoint=endpoint, allow_untested=allow_untested,
        load_only=tuple(load_only), partial=partial, matrix_file=matrix_file, branch=branch, card=not no_card,
        allow_api_change=allow_api_change)
    result = run_push(options, PushView(as_json))
    render_push(result, as_json)
    if result.refused:
        raise refusal(list(result.refused))
    failed = unloadable(result)
    if failed:
        raise failed
    return 0
