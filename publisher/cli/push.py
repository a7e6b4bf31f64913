"""`publisher push [REPO_ID] [PATH]`: publish the variants built in PATH/build/
to a Hub kernel repo as one verified commit on the version branch, and the
kernel card to main."""

from __future__ import annotations

import fnmatch
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import click

from publisher import state
from publisher.builder.metadata import SIGNATURE
from publisher.cli.common import echo_json, matrix_option
from publisher.errors import OfflineError, PublishedIncomplete, PublisherError, ProjectError, TransientError, UsageError
from publisher.findings import Finding
from publisher.push.hub_client import HubClient, RetryPolicy, is_repo_id
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.project.load import require_project
from publisher.push import card as card_mod
from publisher.push import coverage, gate, verify
from publisher.push.signature import SignerWorkflow
from publisher.push.changes import PushPlan
from publisher.push.publish import open_repo, plan_push, plan_without_hub, publish, publish_card
from publisher.secrets import redact


def _say(text: str) -> None:
    click.echo(redact(text), err=True)


def _split_args(args: tuple[str, ...]) -> tuple[str | None, Path]:
    if len(args) > 2:
        raise UsageError("too many arguments: expected [REPO_ID] [PATH]")
    if len(args) == 1 and Path(args[0]).is_dir():
        return None, Path(args[0])
    return (args[0] if args else None), Path(args[1] if len(args) > 1 else ".")


def _variant_dirs(build_dir: Path, include: tuple[str, ...], skip: tuple[str, ...]) -> list[str]:
    names = sorted(p.name for p in build_dir.iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if build_dir.is_dir() else []
    if not names:
        raise UsageError(f"no built variants in {build_dir}", "run `publisher build` first")
    chosen = [n for n in names if (not include or any(fnmatch.fnmatchcase(n, g) for g in include))
              and not any(fnmatch.fnmatchcase(n, g) for g in skip)]
    if not chosen:
        raise UsageError("no built variant matches --variant/--skip", f"built variants: {', '.join(names)}")
    return chosen


def _line(f: Finding) -> str:
    return f"{f.code} {f.message}" + (f"\n    fix: {f.hint}" if f.hint else "")


def _refusal(findings: list[Finding]) -> ProjectError:
    """Errors, then the warnings that came with them (marked)."""
    return ProjectError("push refused:\n" + "\n".join(
        f"  {'' if f.is_error else 'warning: '}{_line(f)}" for f in findings))


def _version(verdicts: list[gate.Verdict], declared: int) -> int:
    versions = {v.variant: v.metadata["version"] for v in verdicts if v.metadata}
    distinct = sorted(set(versions.values()))
    if len(distinct) > 1:
        detail = ", ".join(f"{n}: {ver}" for n, ver in sorted(versions.items()))
        raise ProjectError(f"the variants disagree on the version ({detail})",
                           "rebuild them all from the same build.toml, or push them separately with --variant")
    if distinct and distinct[0] != declared:
        _say(f"warning: the build says version {distinct[0]}, build.toml says {declared}; publishing as {distinct[0]}")
    return distinct[0] if distinct else declared


def _render_plan(plan: PushPlan) -> str:
    rows = [("GROUP", "ADD", "DELETE", "UNCHANGED", "BYTES")]
    for g in plan.groups:
        s = g.summary()
        rows.append((g.name, str(len(s["added"])), str(len(s["deleted"])), str(s["unchanged"]), _size(s["bytes"])))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if plan.kept_variants:
        lines.append(f"kept on the branch, not part of this push: {', '.join(plan.kept_variants)}")
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


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
    repo_arg, path = _split_args(args)
    project = require_project(path)
    general = project.config.general
    repo_id = repo_arg or general.hub_repo_id
    if not repo_id:
        raise UsageError("no repo id: pass REPO_ID or set [general.hub] repo-id in build.toml")
    if not is_repo_id(repo_id):
        source = "REPO_ID" if repo_arg else f"{project.build_toml} [general.hub] repo-id"
        raise UsageError(
            f"{source}: `{repo_id}` is not a Hub repo id",
            "use ORG/NAME with letters, digits, '-', '_' and '.', e.g. your-org/your-kernel",
        )
    build_dir = Path(path) / "build"
    try:
        signer = SignerWorkflow.parse(signer_workflow) if signer_workflow else None
    except ValueError as err:
        raise UsageError(f"--signer-workflow (or GITHUB_WORKFLOW_REF): {err}",
                         "give the signing workflow as GitHub Actions names it, e.g. "
                         "your-org/your-repo/.github/workflows/release.yml@refs/heads/main") from None

    matrix = load_matrix(find_matrix(project.root, matrix_file))  # a bad --matrix stops before the Hub is asked
    # one variant per thread: hashing releases the GIL, and the gate reads every byte of the build
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as hashing:
        verdicts = list(hashing.map(lambda name: gate.judge(build_dir, name, allow_untested, load_only),
                                    _variant_dirs(build_dir, include, skip)))
    findings = [f for v in verdicts for f in v.findings]
    errors = [f for f in findings if f.is_error]
    if errors and not dry_run:
        raise _refusal(errors + [f for f in findings if not f.is_error])
    version = _version(verdicts, general.version)
    branch = branch or general.hub_branch or f"v{version}"
    variants = {v.variant: build_dir / v.variant for v in verdicts}

    retry = RetryPolicy.from_env()
    # a dry run asks once: when the Hub cannot answer it plans from the build alone
    client = HubClient(endpoint, retry=replace(retry, attempts=1) if dry_run else retry,
                       on_retry=lambda message: _say(f"retry: {message}"))
    hashes = {v.variant: v.sha256 for v in verdicts}  # verified by the gate: not computed again
    unreachable = None
    try:
        listed = client.branches_if_exists(repo_id)  # None: no such repo yet
        plan = plan_push(client, repo_id, branch, variants, project.root, listed or {}, sha256=hashes)
    except (TransientError, OfflineError) as err:
        if not dry_run:
            raise
        unreachable, listed = err.message, None
        plan = plan_without_hub(repo_id, branch, variants, project.root, hashes)
    covered = coverage.check(project, matrix, list(variants) + list(plan.kept_variants))
    gap = covered.finding(partial, f"{repo_id}@{branch}")
    if gap is not None:
        findings.append(gap)
        errors += [gap] if gap.is_error else []
    for f in findings:
        if not f.is_error:
            _say(f"warning: {_line(f)}")
    if errors and not dry_run:
        raise _refusal(errors)
    if not dry_run and listed is None:
        branches, created = open_repo(client, repo_id, private, listed, create=True)
        plan = plan_push(client, repo_id, branch, variants, project.root, branches, created, hashes)

    rows = [card_mod.VariantRow(v.variant, v.metadata["backend"]["type"], tuple(v.metadata["backend"].get("archs") or ()),
                                card_mod.describe_test(v.test)) for v in verdicts]
    kept_rows = [card_mod.VariantRow(n, "?", (), "published earlier") for n in plan.kept_variants]
    signed = any((build_dir / name / SIGNATURE).is_file() for name in variants)
    card = card_mod.render(project, repo_id, version, rows + kept_rows, covered.missing, signer=signer, signed=signed)
    readme = state.state_dir(build_dir) / "README.md"
    readme.parent.mkdir(parents=True, exist_ok=True)
    readme.write_text(card.text)

    report: dict = {"repo_id": repo_id, "branch": branch, "version": version, "dry_run": dry_run,
                    "endpoint": client.endpoint, "plan": plan.to_dict(), "card": str(readme),
                    "refused": [f"{f.code} {f.message}" for f in errors],
                    "warnings": [f"{f.code} {f.message}" for f in findings if not f.is_error],
                    "missing_required": dict(covered.missing),
                    "hub": {"compared": unreachable is None, "problem": unreachable}}
    if unreachable:
        _say(f"note: could not compare with the Hub ({unreachable}); the plan shows every file as added, "
             "and cannot say which files are unchanged, which variants the branch keeps, or whether the branch exists")
    if not as_json:
        click.echo(f"{'plan for' if dry_run else 'pushing'} {repo_id} branch {branch} "
                   f"({'existing' if plan.branch_exists else 'new'}"
                   f"{', at ' + plan.parent_commit[:12] if plan.parent_commit else ''})")
        click.echo(_render_plan(plan))
    try:
        resolutions = verify.resolve_cells(list(variants) + list(plan.kept_variants),
                                           coverage.targeted_cells(project, matrix))
    except ImportError:
        _say("note: install `kernels` to see which environment loads which variant")
        resolutions = []
    report["resolutions"] = [r.__dict__ for r in resolutions]
    if dry_run:
        _finish(report, resolutions, as_json, repo_id, version)
        if errors:
            raise _refusal(errors)
        return 0

    if not plan.is_noop:
        _say(f"uploading {len(plan.changes)} change(s), {_size(plan.bytes_to_send)}, as one commit")
    outcome = publish(client, plan, version, create_pr, background=ThreadPoolExecutor(max_workers=1))
    report.update(commit=outcome.commit, reconciled=outcome.reconciled, pr_url=outcome.pr_url)
    if outcome.commit is None and not as_json:
        click.echo("nothing changed: no commit")
    elif not as_json:
        click.echo(f"committed {outcome.commit}" + (f" (pull request: {outcome.pr_url})" if outcome.pr_url else "")
                   + (" — the answer was lost, the branch shows it landed" if outcome.reconciled else ""))

    report["verified"] = True  # publish() compared the commit's files with this build (it raises otherwise)
    report["verify_problems"] = []
    if not as_json:
        click.echo(f"verified: {len(plan.expected())} file(s) on {branch} match the local build")

    if not no_card:
        try:
            card_outcome = publish_card(client, repo_id, readme, card.media, create_pr)
        except PublisherError as err:
            raise PublishedIncomplete(
                f"the kernel is published: {branch} of {repo_id} holds this build (commit "
                f"{(outcome.commit or plan.parent_commit or '?')[:12]}, verified), but the card commit to main failed: "
                f"{err.message}", "run the same push again: the branch is unchanged (no-op) and the card is retried",
            ) from None
        report["card_commit"] = card_outcome.commit
        if not as_json:
            click.echo("card: README.md on main " + (f"updated ({card_outcome.commit[:12]})" if card_outcome.commit
                                                      else "unchanged"))
    _finish(report, resolutions, as_json, repo_id, version)
    return 0


def _finish(report: dict, resolutions: list[verify.Resolution], as_json: bool, repo_id: str, version: int) -> None:
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
