"""The push stage: judge the built variants (gate), plan the change against the
Hub, publish the version branch as one verified commit, then the card on main.
No click here: the command (publisher/cli/push.py) builds PushOptions and
renders what this returns and reports through PushEvents."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from publisher import state
from publisher.builder.metadata import SIGNATURE
from publisher.errors import (
    OfflineError,
    ProjectError,
    PublishedIncomplete,
    PublisherError,
    PushRefused,
    TransientError,
    UsageError,
)
from publisher.findings import Finding, render_line
from publisher.hub_names import repo_id_problem
from publisher.options import PushOptions
from publisher.plan import selection
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.project.load import require_project
from publisher.project.model import Project
from publisher.push import card as card_mod
from publisher.push import coverage, gate, verify
from publisher.push.changes import PushPlan
from publisher.push.hub_client import HubClient, RetryPolicy
from publisher.push.publish import CommitOutcome, open_repo, plan_push, plan_without_hub, publish, publish_card


class PushEvents(Protocol):
    """What the push tells its user as it goes (the command renders it)."""

    def note(self, text: str) -> None:
        """A warning or a note (stderr)."""

    def planned(self, repo_id: str, branch: str, plan: PushPlan, dry_run: bool) -> None:
        """The plan, before anything is sent."""

    def committed(self, outcome: CommitOutcome, branch: str, verified_files: int) -> None:
        """The version branch holds the build (or nothing changed)."""

    def card(self, commit: str | None) -> None:
        """README.md on main was updated (commit) or was already current (None)."""


@dataclass(frozen=True)
class PushResult:
    repo_id: str
    version: int
    report: dict  # the --json document
    resolutions: tuple[verify.Resolution, ...]
    refused: tuple[Finding, ...]  # a dry run's refusals (a real push raises PushRefused instead)


def run_push(options: PushOptions, events: PushEvents) -> PushResult:
    project = require_project(options.path)
    repo_id = _repo_id(options, project)
    build_dir = Path(options.path) / "build"
    dry_run = options.dry_run
    matrix = load_matrix(find_matrix(project.root, options.matrix_file))  # a bad --matrix stops before the Hub is asked
    # one variant per thread: hashing releases the GIL, and the gate reads every byte of the build
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as hashing:
        verdicts = list(hashing.map(
            lambda name: gate.judge(build_dir, name, options.allow_untested, options.load_only),
            _variant_dirs(build_dir, options)))
    findings = [f for v in verdicts for f in v.findings]
    errors = [f for f in findings if f.is_error]
    if errors and not dry_run:
        raise refusal(errors + [f for f in findings if not f.is_error])
    version = _version(verdicts, project.config.general.version, events)
    branch = options.branch or project.config.general.hub_branch or f"v{version}"
    variants = {v.variant: build_dir / v.variant for v in verdicts}

    retry = RetryPolicy.from_env()
    # a dry run asks once: when the Hub cannot answer it plans from the build alone
    client = HubClient(options.endpoint, retry=replace(retry, attempts=1) if dry_run else retry,
                       on_retry=lambda message: events.note(f"retry: {message}"))
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
    gap = covered.finding(options.partial, f"{repo_id}@{branch}")
    if gap is not None:
        findings.append(gap)
        errors += [gap] if gap.is_error else []
    for f in findings:
        if not f.is_error:
            events.note(f"warning: {render_line(f)}")
    if errors and not dry_run:
        raise refusal(errors)
    if not dry_run and listed is None:
        branches, created = open_repo(client, repo_id, options.private, listed, create=True)
        plan = plan_push(client, repo_id, branch, variants, project.root, branches, created, hashes)

    rows = [card_mod.VariantRow(v.variant, v.metadata["backend"]["type"], tuple(v.metadata["backend"].get("archs") or ()),
                                card_mod.describe_test(v.test)) for v in verdicts]
    kept_rows = [card_mod.VariantRow(n, "?", (), "published earlier") for n in plan.kept_variants]
    signed = any((build_dir / name / SIGNATURE).is_file() for name in variants)
    card = card_mod.render(project, repo_id, version, rows + kept_rows, covered.missing, signer=options.signer,
                           signed=signed)
    readme = state.state_dir(build_dir) / "README.md"
    readme.parent.mkdir(parents=True, exist_ok=True)
    readme.write_text(card.text)

    report: dict = {"repo_id": repo_id, "branch": branch, "version": version, "dry_run": dry_run,
                    "endpoint": client.endpoint, "plan": plan.to_dict(), "card": str(readme),
                    "refused": [f"{f.code} {f.message}" for f in errors],
                    "warnings": [f"{f.code} {f.message}" for f in findings if not f.is_error],
                    "findings": [f.to_json() for f in findings],
                    "missing_required": dict(covered.missing),
                    "hub": {"compared": unreachable is None, "problem": unreachable}}
    if unreachable:
        events.note(f"note: could not compare with the Hub ({unreachable}); the plan shows every file as added, "
                    "and cannot say which files are unchanged, which variants the branch keeps, or whether the branch "
                    "exists")
    events.planned(repo_id, branch, plan, dry_run)
    try:
        resolutions = verify.resolve_cells(list(variants) + list(plan.kept_variants),
                                           coverage.targeted_cells(project, matrix))
    except ImportError:
        events.note("note: install `kernels` to see which environment loads which variant")
        resolutions = []
    report["resolutions"] = [r.__dict__ for r in resolutions]
    result = PushResult(repo_id, version, report, tuple(resolutions), tuple(errors))
    if dry_run:
        return result

    if not plan.is_noop:
        events.note(f"uploading {len(plan.changes)} change(s), {size(plan.bytes_to_send)}, as one commit")
    outcome = publish(client, plan, version, options.create_pr, background=ThreadPoolExecutor(max_workers=1))
    report.update(commit=outcome.commit, reconciled=outcome.reconciled, pr_url=outcome.pr_url)
    report["verified"] = True  # publish() compared the commit's files with this build (it raises otherwise)
    report["verify_problems"] = []
    events.committed(outcome, branch, len(plan.expected()))

    if options.card:
        try:
            card_outcome = publish_card(client, repo_id, readme, card.media, options.create_pr)
        except PublisherError as err:
            raise PublishedIncomplete(
                f"the kernel is published: {branch} of {repo_id} holds this build (commit "
                f"{(outcome.commit or plan.parent_commit or '?')[:12]}, verified), but the card commit to main failed: "
                f"{err.message}", "run the same push again: the branch is unchanged (no-op) and the card is retried",
            ) from None
        report["card_commit"] = card_outcome.commit
        events.card(card_outcome.commit)
    return result


def refusal(findings: list[Finding]) -> PushRefused:
    """Errors, then the warnings that came with them (marked)."""
    return PushRefused("push refused:\n" + "\n".join(
        f"  {'' if f.is_error else 'warning: '}{render_line(f)}" for f in findings), findings)


def size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _repo_id(options: PushOptions, project: Project) -> str:
    repo_id = options.repo_id or project.config.general.hub_repo_id
    if not repo_id:
        raise UsageError("no repo id: pass REPO_ID or set [general.hub] repo-id in build.toml")
    problem = repo_id_problem(repo_id)
    if problem:
        source = "REPO_ID" if options.repo_id else f"{project.build_toml} [general.hub] repo-id"
        raise UsageError(
            f"{source}: `{repo_id}` is not a Hub repo id ({problem})",
            "use ORG/NAME with letters, digits, '-', '_' and '.', e.g. your-org/your-kernel",
        )
    return repo_id


def _variant_dirs(build_dir: Path, options: PushOptions) -> list[str]:
    names = sorted(p.name for p in build_dir.iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if build_dir.is_dir() else []
    if not names:
        raise UsageError(f"no built variants in {build_dir}", "run `publisher build` first")
    include, skip = options.selection.include, options.selection.skip
    chosen = selection.chosen(names, include, skip)
    if not chosen:
        raise UsageError("no built variant matches --variant/--skip", f"built variants: {', '.join(names)}")
    return chosen


def _version(verdicts: list[gate.Verdict], declared: int, events: PushEvents) -> int:
    versions = {v.variant: v.metadata["version"] for v in verdicts if v.metadata}
    distinct = sorted(set(versions.values()))
    if len(distinct) > 1:
        detail = ", ".join(f"{n}: {ver}" for n, ver in sorted(versions.items()))
        raise ProjectError(f"the variants disagree on the version ({detail})",
                           "rebuild them all from the same build.toml, or push them separately with --variant")
    if distinct and distinct[0] != declared:
        events.note(f"warning: the build says version {distinct[0]}, build.toml says {declared}; "
                    f"publishing as {distinct[0]}")
    return distinct[0] if distinct else declared
