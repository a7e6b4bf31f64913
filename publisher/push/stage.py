"""The push stage: judge the built variants (gate), plan the change against the
Hub, publish the version branch as one verified commit, then the card on main.
No click here: the command (publisher/cli/push.py) builds PushOptions and
renders what this returns and reports through PushEvents."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Protocol

from publisher import env, state
from publisher.bench.card import card_section
from publisher.builder.metadata import SIGNATURE
from publisher.codes import finding
from publisher.consumer import LoadCall, Publisher
from publisher.errors import (
    OfflineError,
    ProjectError,
    PublishedIncomplete,
    PublisherError,
    PushRefused,
    TransientError,
    UsageError,
)
from publisher.findings import Finding, Severity, render_line
from publisher.hub_names import repo_id_problem
from publisher.options import PushOptions
from publisher.plan import resolver, selection
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.project.load import require_project
from publisher.project.model import Project
from publisher.push import card as card_mod
from publisher.push import consumer_load, coverage, gate, public_api, verify
from publisher.push.changes import LocalFile, PushPlan, benchmark_files, variant_files
from publisher.push.consumer_load import ConsumerLoad, ConsumersCannotLoad
from publisher.push.early import EarlyUpload, place, published_from_here, record_published
from publisher.push.hub_client import HubClient, RetryPolicy
from publisher.push.publish import CommitOutcome, Staging, plan_push, plan_without_hub, publish, publish_card
from publisher.push.signature import SignerWorkflow


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
    load_call: LoadCall | None = None  # how the card tells consumers to load it
    consumer: ConsumerLoad | None = None  # that call, made as a consumer after the commit (None: not made)


def unloadable(result: PushResult) -> ConsumersCannotLoad | None:
    """The error a published release ends with when consumers cannot load it as the card says."""
    if result.consumer is not None and result.consumer.failed and result.load_call is not None:
        return ConsumersCannotLoad(result.consumer, result.load_call)
    return None


def run_push(options: PushOptions, events: PushEvents) -> PushResult:
    project = require_project(options.path)
    repo_id = _repo_id(options, project)
    build_dir = Path(options.path) / "build"
    dry_run = options.dry_run
    matrix = load_matrix(find_matrix(project.root, options.matrix_file))  # a bad --matrix stops before the Hub is asked

    retry = RetryPolicy.from_env()
    # a dry run asks once: when the Hub cannot answer it plans from the build alone
    client, client_problem = None, None
    try:
        client = HubClient(options.endpoint, retry=replace(retry, attempts=1) if dry_run else retry,
                           on_retry=lambda message: events.note(f"retry: {message}"))
    except PublisherError as err:
        client_problem = err  # raised where the Hub is first needed: a refused build is reported first
    # the repo's branches are asked for while the gate reads every byte of the build; a failed look-ahead is
    # simply asked again below (with retries), and a refused push never waits for it
    early = _in_background(lambda: client.single_attempt().branches_if_exists(repo_id)) if client else None
    # what the Hub says of the owner decides the load call on the card (asked as `kernels` asks it)
    standing = _in_background(lambda: client.single_attempt().publisher(repo_id.split("/", 1)[0])) if client else None

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
    if client is None:
        raise client_problem
    hashes = {v.variant: v.sha256 for v in verdicts}  # verified by the gate: not computed again
    api = public_api.extract(project, list(variants.values()))
    records = (_api_record(build_dir, api),)
    where = place(client.endpoint, repo_id, branch)
    covered_here = coverage.check(project, matrix, variants)  # the release without what the branch may keep
    sending = None if dry_run else _send_early(client, repo_id, branch, early, build_dir, variants, hashes, project,
                                               covered_here.finding(options.partial, repo_id), where, records)
    # `kernels`, for the resolution table, is imported while the Hub answers (not before: its import
    # would hold up the requests above, which wait for the same interpreter lock)
    _in_background(resolver.warm)
    unreachable = None
    staging = None
    loading = None  # the consumer load, once the version is published
    try:
        if not dry_run and not options.create_pr:  # (a pull request leaves the branch consumers load as it is)
            # a consumer's fresh process imports torch and kernels while the Hub answers and the files travel
            loading = consumer_load.PendingLoad(client.endpoint)
        try:
            listed = _answer(early) if early else None
            if early is None or (isinstance(listed, BaseException) and not dry_run):
                listed = client.branches_if_exists(repo_id)  # None: no such repo yet
            elif isinstance(listed, BaseException):
                raise listed  # a dry run asks once
            if sending is not None and listed and branch not in listed and listed.get("main"):
                # a new version branch's staging branch is made while main's files are read for the plan;
                # removed below if the push stops before its commit
                staging = Staging(client, repo_id, branch, listed["main"])
            plan = plan_push(client, repo_id, branch, variants, project.root, listed or {}, sha256=hashes,
                             records=records)
        except (TransientError, OfflineError) as err:
            if not dry_run:
                raise
            unreachable, listed = err.message, None
            plan = plan_without_hub(repo_id, branch, variants, project.root, hashes, records)
        covered = coverage.check(project, matrix, list(variants) + list(plan.kept_variants)) \
            if plan.kept_variants else covered_here
        gap = covered.finding(options.partial, f"{repo_id}@{branch}")
        if gap is not None:
            findings.append(gap)
            errors += [gap] if gap.is_error else []
        api_change, api_findings = _api_check(client, plan, api, version, options) if unreachable is None else (None, [])
        findings += api_findings
        errors += [f for f in api_findings if f.is_error]
        for f in findings:
            if not f.is_error:
                events.note(f"warning: {render_line(f)}")
        if errors and not dry_run:
            raise refusal(errors)

        call = LoadCall(repo_id, version, _publisher(standing))
        card, readme = _write_card(project, call, verdicts, plan, covered, options.signer, build_dir, api)
        if options.card:
            unloadable_card = _card_calls(card, call, readme)
            findings += unloadable_card
            errors += unloadable_card
            if unloadable_card and not dry_run:
                raise refusal(errors)

        report: dict = {"repo_id": repo_id, "branch": branch, "version": version, "dry_run": dry_run,
                        "endpoint": client.endpoint, "plan": plan.to_dict(), "card": str(readme),
                        "refused": [f"{f.code} {f.message}" for f in errors],
                        "warnings": [f"{f.code} {f.message}" for f in findings if not f.is_error],
                        "findings": [f.to_json() for f in findings],
                        "missing_required": dict(covered.missing),
                        "public_api": _api_report(api, api_change),
                        "hub": {"compared": unreachable is None, "problem": unreachable}}
        if unreachable:
            events.note(f"note: could not compare with the Hub ({unreachable}); the plan shows every file as added, "
                        "and cannot say which files are unchanged, which variants the branch keeps, or whether the branch "
                        "exists")
        events.planned(repo_id, branch, plan, dry_run)
        # which environment loads which variant: `kernels` is imported and asked while the files travel
        resolving = _in_background(lambda: verify.resolve_cells(list(variants) + list(plan.kept_variants),
                                                                coverage.targeted_cells(project, matrix)))
        report["load_call"] = call.render()
        result = PushResult(repo_id, version, report, (), tuple(errors), load_call=call)
        if dry_run:
            return _with_resolutions(result, resolving, events)

        main_read_early = _read_main_early(client, plan) if options.card else None
        if listed is None:  # a new repo (its plan compared with nothing); main's head is read while the files upload
            client.ensure_repo(repo_id, options.private)
        if not plan.is_noop:
            events.note(f"uploading {len(plan.changes)} change(s), {size(plan.bytes_to_send)}, as one commit")
        # the staging branch is removed beside the version branch's creation and the card: done before returning
        background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="publisher-cleanup")
        outcome = publish(client, plan, version, options.create_pr, background=background, early=sending,
                          staging=staging)
        report.update(commit=outcome.commit, reconciled=outcome.reconciled, pr_url=outcome.pr_url)
        report["verified"] = True  # publish() compared the commit's files with this build (it raises otherwise)
        report["verify_problems"] = []
        events.committed(outcome, branch, len(plan.expected()))
        # the version is published: the consumer loads it while the card commits
        if loading is not None:
            _load_as_consumer(loading, client, call, list(variants) + list(plan.kept_variants))
            if env.hub_telemetry_disabled():
                events.note("note: HF_HUB_DISABLE_TELEMETRY is set here; kernels 0.17.2 then sends an invalid "
                            "User-Agent and loads no kernel, so the consumer load runs without it")

        if options.card:
            try:
                card_outcome = publish_card(client, repo_id, readme, card.media, options.create_pr,
                                            main_read_early)
            except PublisherError as err:
                raise PublishedIncomplete(
                    f"the kernel is published: {branch} of {repo_id} holds this build (commit "
                    f"{(outcome.commit or plan.parent_commit or '?')[:12]}, verified), but the card commit to main failed: "
                    f"{err.message}", "run the same push again: the branch is unchanged (no-op) and the card is retried",
                ) from None
            report["card_commit"] = card_outcome.commit
            events.card(card_outcome.commit)
        background.shutdown(wait=True)
        if loading is not None:
            _try_record(build_dir, variants, where)
            load = loading.result()
            report["consumer"] = load.to_dict()
            report["findings"] += [f.to_json() for f in consumer_load.findings(load, call)]
            result = replace(result, consumer=load)
        return _with_resolutions(result, resolving, events)
    except BaseException:
        if staging is not None:
            staging.remove()  # a push that stops before its commit leaves no branch of its own behind
        if loading is not None:
            loading.cancel()
        raise


def _in_background(work: Callable[[], object]) -> Future:
    """`work` in a daemon thread (the process never waits for it at exit)."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as err:  # noqa: BLE001 - handed to whoever asks for the answer
            future.set_exception(err)

    threading.Thread(target=run, name="publisher-push-side", daemon=True).start()
    return future


def _send_early(client: HubClient, repo_id: str, branch: str, look_ahead: Future | None, build_dir: Path,
                variants: dict[str, Path], hashes: dict, project: Project, gap: Finding | None,
                where: str, records: tuple[LocalFile, ...]) -> EarlyUpload | None:
    """The gate has passed the build: its files go while the Hub answers the look-ahead and the plan's
    reads. Not when the variants here alone do not cover the release (`gap`: the coverage check, with
    what the branch keeps, may still refuse it), nor when it would be wasted: the branches, already
    listed, show no repo yet (nowhere to send them) or an existing branch (perhaps unchanged: a re-push
    sends nothing); or, not listed yet, this folder already published this very build to `where`."""
    if look_ahead is None or (gap is not None and gap.is_error):
        return None
    if look_ahead.done():
        listed = _answer(look_ahead)
    else:
        listed = None if published_from_here(build_dir, variants, where) else {}
    if not isinstance(listed, dict) or branch in listed:
        return None
    return EarlyUpload(client, repo_id, [f for name in sorted(variants)
                                         for f in variant_files(variants[name], name, hashes.get(name))]
                       + benchmark_files(project.root) + list(records))


def _api_record(build_dir: Path, api: public_api.PublicApi) -> LocalFile:
    """This release's public API, written where the push reads its files from."""
    path = state.state_dir(build_dir) / public_api.API_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(api.to_json())
    return LocalFile.read(public_api.API_FILE, path)


def _api_check(client: HubClient, plan: PushPlan, api: public_api.PublicApi, version: int,
               options: PushOptions) -> tuple[public_api.ApiChange | None, list[Finding]]:
    """This push's public API against the record on the version branch it goes to (a new
    branch is a new version: nothing to keep)."""
    where = f"{plan.repo_id}@{plan.branch}"
    if not plan.branch_exists:
        return None, []
    published = None
    if public_api.API_FILE in plan.remote:
        with tempfile.TemporaryDirectory(prefix="publisher-api-") as folder:
            client.download(plan.repo_id, plan.parent_commit or plan.branch, [public_api.API_FILE], Path(folder))
            published = public_api.PublicApi.from_json((Path(folder) / public_api.API_FILE).read_text(errors="replace"))
    if published is None:
        why = "holds no" if public_api.API_FILE not in plan.remote else "holds an unreadable"
        return None, [finding("PP302", f"{where} {why} {public_api.API_FILE}: whether this push removes or changes a "
                              "function, layer or op schema its callers use cannot be checked",
                              hint="compare by hand with what the branch holds; this push records its API for the next")]
    change = public_api.compare(published, api)
    if not change.breaking:
        return change, []
    listed = "\n    ".join(change.lines()[:20]) + ("\n    ..." if len(change.lines()) > 20 else "")
    return change, [finding(
        "PP301", f"the public API of version {version} ({where}) would change for the code that already uses it:\n"
                 f"    {listed}\n  bump `version` in build.toml to publish it as a new version",
        severity=Severity.WARNING if options.allow_api_change else None,
        hint="bump `version` in build.toml (callers of this version keep what they use), or pass --allow-api-change "
             "when breaking them is deliberate")]


def _api_report(api: public_api.PublicApi, change: public_api.ApiChange | None) -> dict:
    return {"entries": dict(api.entries), "compared": change is not None,
            "removed": [k for k, _ in change.removed] if change else [],
            "changed": [k for k, _, _ in change.changed] if change else [],
            "added": [k for k, _ in change.added] if change else []}


def _publisher(standing: Future | None) -> Publisher:
    """What the Hub said of the owner; UNKNOWN when it could not say (the card then shows the call that
    loads for every owner)."""
    answer = _answer(standing) if standing is not None else None
    return answer if isinstance(answer, Publisher) else Publisher.UNKNOWN


def _card_calls(card: card_mod.Card, call: LoadCall, readme: Path) -> list[Finding]:
    """PP402 for each `kernels` call on the card that cannot load the kernel for its owner."""
    return [finding("PP402", f"the card shows `{found}`, which fails for consumers: {call.untrusted_because()}, "
                    "so kernels refuses the repository without trust_remote_code",
                    file=str(readme), hint=f"write `{{{{ load_call }}}}` in CARD.md (it renders `{call.render()}`), "
                    f'or add trust_remote_code=["{call.repo_id}"] to the call')
            for found in card_mod.unloadable_calls(card.text, call)]


def _load_as_consumer(loading: consumer_load.PendingLoad, client: HubClient, call: LoadCall,
                      variants: list[str]) -> None:
    """The card's call, made as a consumer; with the token only where the repo is private."""
    try:
        private = client.single_attempt().is_private(call.repo_id)
    except PublisherError:
        private = False
    loading.go(call, variants, token=client.token if private else None)


def _write_card(project: Project, call: LoadCall, verdicts: list[gate.Verdict], plan: PushPlan,
                covered: coverage.Coverage, signer: SignerWorkflow | None, build_dir: Path,
                api: public_api.PublicApi) -> tuple[card_mod.Card, Path]:
    """The kernel card of this release, written to build/.publisher/README.md (a dry run shows it too)."""
    rows = [card_mod.VariantRow(v.variant, v.metadata["backend"]["type"], tuple(v.metadata["backend"].get("archs") or ()),
                                card_mod.describe_test(v.test)) for v in verdicts]
    kept_rows = [card_mod.VariantRow(n, "?", (), "published earlier") for n in plan.kept_variants]
    signed = any((build_dir / v.variant / SIGNATURE).is_file() for v in verdicts)
    measured = card_section(build_dir, {v.variant: build_dir / v.variant for v in verdicts},
                            state.state_dir(build_dir) / "card-media")
    card = card_mod.render(project, call.repo_id, call.version, rows + kept_rows, covered.missing, signer=signer,
                           signed=signed, measured=measured, api=api, publisher=call.publisher)
    readme = state.state_dir(build_dir) / "README.md"
    readme.parent.mkdir(parents=True, exist_ok=True)
    readme.write_text(card.text)
    return card, readme


def _try_record(build_dir: Path, variants: dict[str, Path], where: str) -> None:
    """What this folder has published, for the next push's choice (a record that cannot be written only
    costs that choice)."""
    try:
        record_published(build_dir, variants, where)
    except OSError:
        pass


def _read_main_early(client: HubClient, plan: PushPlan) -> Callable[[], tuple[str, dict]] | None:
    """main's head and files, for the card, read while the build uploads (or as the plan read them)."""
    head = plan.branches.get("main")
    if not head:
        return None
    if not plan.branch_exists and plan.parent_commit == head:
        reading: Future = Future()
        reading.set_result(plan.remote)  # a new version branch was planned against main: read already
    else:
        reading = _in_background(lambda: client.single_attempt().tree(plan.repo_id, head))
    return partial(_main_as_read, client, plan.repo_id, head, reading)


def _main_as_read(client: HubClient, repo_id: str, head: str, reading: Future) -> tuple[str, dict]:
    """main's head and files as read in the background (read again, with retries, if that failed)."""
    files = _answer(reading)
    return head, (client.tree(repo_id, head) if isinstance(files, BaseException) else files)


def _answer(future: Future) -> object:
    """The result, or the exception it raised."""
    try:
        return future.result()
    except BaseException as err:  # noqa: BLE001
        return err


def _with_resolutions(result: PushResult, resolving: Future, events: PushEvents) -> PushResult:
    answer = _answer(resolving)
    if isinstance(answer, ImportError):
        events.note("note: install `kernels` to see which environment loads which variant")
        answer = []
    elif isinstance(answer, BaseException):
        raise answer
    result.report["resolutions"] = [r.__dict__ for r in answer]
    return replace(result, resolutions=tuple(answer))


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
