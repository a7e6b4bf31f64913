"""`publisher push [REPO_ID] [PATH]`: publish the variants built in PATH/build/
to a Hub kernel repo as one verified commit on the version branch, and the
kernel card to main. The stage is publisher/push/stage.py; this module parses
and renders."""

from __future__ import annotations

import click

from publisher.cli.common import echo_json, matrix_option
from publisher.options import PushOptions, Selection
from publisher.push.changes import PushPlan
from publisher.push.publish import CommitOutcome
from publisher.push.stage import PushResult, refusal, run_push, size
from publisher.secrets import redact


class PushView:
    """PushEvents for a terminal: notes on stderr, the plan and the commit on stdout (not with --json)."""

    def __init__(self, as_json: bool):
        self.as_json = as_json

    def note(self, text: str) -> None:
        click.echo(redact(text), err=True)

    def planned(self, repo_id: str, branch: str, plan: PushPlan, dry_run: bool) -> None:
        if self.as_json:
            return
        click.echo(f"{'plan for' if dry_run else 'pushing'} {repo_id} branch {branch} "
                   f"({'existing' if plan.branch_exists else 'new'}"
                   f"{', at ' + plan.parent_commit[:12] if plan.parent_commit else ''})")
        click.echo(render_plan(plan))

    def committed(self, outcome: CommitOutcome, branch: str, verified_files: int) -> None:
        if self.as_json:
            return
        if outcome.commit is None:
            click.echo("nothing changed: no commit")
        else:
            click.echo(f"committed {outcome.commit}" + (f" (pull request: {outcome.pr_url})" if outcome.pr_url else "")
                       + (" — the answer was lost, the branch shows it landed" if outcome.reconciled else ""))
        click.echo(f"verified: {verified_files} file(s) on {branch} match the local build")

    def card(self, commit: str | None) -> None:
        if not self.as_json:
            click.echo("card: README.md on main " + (f"updated ({commit[:12]})" if commit else "unchanged"))


def render_plan(plan: PushPlan) -> str:
    rows = [("GROUP", "ADD", "DELETE", "UNCHANGED", "BYTES")]
    for g in plan.groups:
        s = g.summary()
        rows.append((g.name, str(len(s["added"])), str(len(s["deleted"])), str(s["unchanged"]), size(s["bytes"])))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if plan.kept_variants:
        lines.append(f"kept on the branch, not part of this push: {', '.join(plan.kept_variants)}")
    return "\n".join(lines)


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
@matrix_option
@click.option("--variant", "include", multiple=True, metavar="GLOB", help="Only variants matching GLOB (repeatable).")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out variants matching GLOB (repeatable).")
@click.option("--branch", help="Branch to publish to (default: [general.hub] branch, else v<version>).")
@click.option("--no-card", is_flag=True, help="Do not update README.md on main.")
@click.option("--signer-workflow", envvar="GITHUB_WORKFLOW_REF", metavar="OWNER/REPO/.github/workflows/FILE@REF",
              help="The workflow that signed the variants, for the card's verification policy (default: GITHUB_WORKFLOW_REF).")
def command(args, private, dry_run, create_pr, as_json, endpoint, allow_untested, load_only, partial, matrix_file,
            include, skip, branch, no_card, signer_workflow) -> int:
    """Publish the built variants of the project at PATH (default .) to REPO_ID
    (default [general.hub] repo-id) as one verified commit.

    \b
    Exit codes: 0 published (or nothing to change), 1 refused or failed before
    anything was published, 2 usage error, 3 the Hub could not be reached,
    4 the version branch was committed and verified but a later step (the
    card on main) failed: the kernel is published; run the push again."""
    options = PushOptions.from_args(
        args, signer_workflow=signer_workflow, selection=Selection(tuple(include), tuple(skip)), private=private,
        dry_run=dry_run, create_pr=create_pr, endpoint=endpoint, allow_untested=allow_untested,
        load_only=tuple(load_only), partial=partial, matrix_file=matrix_file, branch=branch, card=not no_card)
    result = run_push(options, PushView(as_json))
    render(result, as_json)
    if result.refused:
        raise refusal(list(result.refused))
    return 0


def render(result: PushResult, as_json: bool) -> None:
    """The report (--json), else which environment loads which variant."""
    report, resolutions, repo_id, version = result.report, result.resolutions, result.repo_id, result.version
    if as_json:
        echo_json(report)
        return
    click.echo(f"\nget_kernel(\"{repo_id}\", version={version}) in each environment of the matrix:")
    width = max((len(r.environment) for r in resolutions), default=0)
    for r in resolutions:
        target = r.variant if r.variant else f"none ({r.reason})"
        flag = "  MISSING: required" if r.variant is None and r.required else ""
        click.echo(f"  {r.environment.ljust(width)}  -> {target}{flag}")
    missing = [r.environment for r in resolutions if r.variant is None]
    if missing:
        required = sum(1 for r in resolutions if r.variant is None and r.required)
        click.echo(f"{len(missing)} environment(s) get no variant" + (f", {required} of them required" if required else "")
                   + ".")
    if report.get("missing_required"):
        click.echo("missing required variants: " + "; ".join(
            f"{platform}: {', '.join(names)}" for platform, names in report["missing_required"].items()))
