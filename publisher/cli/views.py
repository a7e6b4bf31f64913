"""How the commands show their stages' results: one renderer per stage, shared
by the command of that stage and by `release`, which runs them all. No stage
logic here; each function takes a stage's result and prints it."""

from __future__ import annotations

import sys

import click

from publisher import state
from publisher.bench.stage import BenchRun
from publisher.bench.table import render_table as render_bench_table
from publisher.builder.stage import BuildRun, run_build
from publisher.cli.common import echo_json
from publisher.errors import EXIT_FAILED, EXIT_OK
from publisher.findings import has_errors, render_human, render_json
from publisher.options import BuildCommandOptions
from publisher.project.stage import CheckResult
from publisher.push.changes import PushPlan
from publisher.push.publish import CommitOutcome
from publisher.push.stage import PushResult, size
from publisher.secrets import redact
from publisher.testing.report import render_table
from publisher.testing.stage import TestRun
from publisher.ui import PlainLines, make_progress, render_summary


def render_check(result: CheckResult, fmt: str) -> int:
    """The findings (text or JSON) and the verdict; the exit code."""
    path, project, findings = result.options.path, result.project, list(result.findings)
    failed = has_errors(findings)
    if fmt == "json":
        click.echo(render_json(findings, path=str(path), ok=not failed,
                               name=project.name if project else None,
                               edition=project.config.edition if project else None))
    else:
        if findings:
            click.echo(render_human(findings))
        if project is not None:
            kind = "folder" if project.root is not None and not result.options.config_only else "build.toml"
            click.echo(f"{project.name} v{project.config.general.version}: {kind} OK")
        elif not failed:
            click.echo("OK")
    return EXIT_FAILED if failed else EXIT_OK


def build_with_progress(options: BuildCommandOptions, as_json: bool) -> BuildRun:
    """The build stage with this terminal's progress display and notes."""
    progress = PlainLines(sys.stderr) if as_json else make_progress()
    return run_build(options, progress, note=lambda text: click.echo(redact(text), err=True))


def render_build(run: BuildRun, as_json: bool) -> int:
    if not run.results:  # --only-failed with nothing failed: said so already
        return 0
    rows = [r.as_dict() for r in run.results]
    if as_json:
        echo_json({"build_dir": str(run.build_dir), "report": str(state.build_report_path(run.build_dir)),
                   "variants": rows})
    else:
        click.echo(render_summary(rows))
        click.echo(f"logs: {state.logs_dir(run.build_dir)}")
    return 0 if run.ok else EXIT_FAILED


def render_test_run(run: TestRun, as_json: bool) -> None:
    if as_json:
        echo_json({
            "ok": run.ok,
            "report": str(run.report_path),
            "variants": {r.variant: r.entry() for r in run.results},
        })
        return
    click.echo(render_table(list(run.results)))
    for r in run.blocking():
        if r.output_tail:
            click.echo(f"\n--- {r.variant}: {r.status} — last lines of output (full log: {r.log}) ---")
            click.echo(r.output_tail)
    click.echo(f"\nreport: {run.report_path}")


def render_bench_run(run: BenchRun, as_json: bool) -> None:
    if as_json:
        echo_json({"ok": run.ok, "files": [str(p) for p in run.files], "plots": [str(p) for p in run.plots],
                   "variants": {r.variant: r.report() for r in run.results}})
        return
    click.echo(render_bench_table(list(run.results)))
    for path, svg in zip(run.files, run.plots, strict=True):
        click.echo(f"\nresults: {path}\nplot:    {svg}")


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


def render_push(result: PushResult, as_json: bool) -> None:
    """The report (--json), else which environment loads which variant."""
    report, resolutions, repo_id, version = result.report, result.resolutions, result.repo_id, result.version
    if as_json:
        echo_json(report)
        return
    call = result.load_call.render() if result.load_call else f'get_kernel("{repo_id}", version={version})'
    click.echo(f"\n{call} in each environment of the matrix:")
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
    if result.consumer is not None:
        click.echo(f"consumer load: {result.consumer.summary()}")
