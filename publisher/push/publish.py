"""Carry a PushPlan to the Hub as one commit, so the repo never shows a partial
release:

- existing version branch: one create_commit with parent_commit = the head the
  plan was made against; a concurrent push makes it fail (412), not overwrite.
- new version branch: the commit is made on a staging branch (a name `kernels`
  ignores) started at main's head, and only then is `v<N>` created at that
  commit; the version branch appears complete or not at all. The staging branch
  is made while the LFS files upload (they belong to the repo, not to a branch).

A commit whose answer was lost (dropped connection, 5xx after it landed) is
recognised by reading the branch back: if it holds exactly this push's files
the commit landed; if it still sits at the parent, the commit is retried; if it
moved elsewhere another push won.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from publisher.errors import ConflictError, TransientError, UsageError, VerificationFailed
from publisher.push.changes import ADD, DELETE, LocalFile, PushPlan, benchmark_files, make_plan
from publisher.push.hub_client import HubClient, RemoteFile, Upload
from publisher.push.verify import compare

STAGING_PREFIX = "publisher-staging-"
STAGING_MAX_AGE = 3600
COMMIT_MESSAGE = "Publish {repo} v{version}: {variants}"


@dataclass(frozen=True)
class CommitOutcome:
    commit: str | None  # None: nothing changed, no commit
    pr_url: str | None = None
    reconciled: bool = False  # the answer was lost but the commit had landed


def read_branch(client: HubClient, repo_id: str, branch: str, branches: dict[str, str],
                new_repo: bool) -> tuple[dict[str, RemoteFile], bool, str | None]:
    """(files, branch exists, head or base commit). A new branch starts from main;
    a repo this push has just created holds nothing to compare with."""
    if branch in branches:
        return client.tree(repo_id, branches[branch]), True, branches[branch]
    base = branches.get("main")
    return (client.tree(repo_id, base) if base and not new_repo else {}), False, base


def plan_push(client: HubClient, repo_id: str, branch: str, variants: dict[str, Path], project_root: Path,
              branches: dict[str, str], new_repo: bool = False,
              sha256: dict[str, dict[str, str] | None] | None = None) -> PushPlan:
    remote, exists, head = read_branch(client, repo_id, branch, branches, new_repo)
    return make_plan(repo_id, branch, variants, benchmark_files(project_root), remote, not exists, head,
                     sha256, branches)


def plan_without_hub(repo_id: str, branch: str, variants: dict[str, Path], project_root: Path,
                     sha256: dict[str, dict[str, str] | None] | None = None) -> PushPlan:
    """The plan of a dry run that cannot reach the Hub: every file added, nothing compared."""
    return make_plan(repo_id, branch, variants, benchmark_files(project_root), {}, True, None, sha256)


def _commit_reconciled(client: HubClient, plan: PushPlan, target: str, message: str, description: str,
                       create_pr: bool, operations: list | None = None) -> CommitOutcome:
    """`operations`: the first attempt's, from HubClient.upload (a retry makes its own)."""
    expected, deleted = plan.expected(), plan.deleted()
    attempts = client.retry.attempts
    for attempt in range(1, attempts + 1):
        try:
            result = client.commit(plan.repo_id, target, plan.uploads(), message, plan.parent_commit or "",
                                   create_pr=create_pr, description=description,
                                   operations=operations if attempt == 1 else None)
            return CommitOutcome(result.oid, result.pr_url)
        except (TransientError, ConflictError) as err:
            if create_pr:
                raise  # a PR cannot be checked back safely; rerunning the push is
            head = client.branches(plan.repo_id).get(target)
            if head == plan.parent_commit:  # nothing landed
                if attempt == attempts:
                    raise
                wait = client.retry.wait(attempt)
                client.on_retry(f"commit: {err.message}; the branch is unchanged, retrying in {wait:g}s")
                time.sleep(wait)
                continue
            if head is not None and not compare(expected, deleted, client.tree(plan.repo_id, head)):
                return CommitOutcome(head, reconciled=True)
            raise ConflictError(
                f"branch {plan.branch} of {plan.repo_id} moved while this push was running (another push landed "
                "first); nothing from this push was committed",
                "run the push again: it re-reads the branch and uploads only what still differs",
            ) from None
    raise AssertionError("unreachable")


def _verify(client: HubClient, plan: PushPlan, commit: str | None) -> None:
    """The commit holds exactly this push's files (a no-op push: the head the
    plan read already does, so nothing is read again)."""
    remote = client.tree(plan.repo_id, commit) if commit else plan.remote
    problems = compare(plan.expected(), plan.deleted(), remote)
    if problems:
        raise VerificationFailed(problems)


def publish(client: HubClient, plan: PushPlan, version: int, create_pr: bool,
            background: Executor | None = None) -> CommitOutcome:
    """Commit the plan and verify it; raises VerificationFailed when the commit
    does not hold this build (a new version branch is then not created).
    `background` removes the staging branch while the caller goes on (its
    threads are joined before the process exits)."""
    if plan.is_noop:
        _verify(client, plan, None)
        return CommitOutcome(None)
    names = [g.name for g in plan.groups if g.of(ADD) or g.of(DELETE)]
    message = COMMIT_MESSAGE.format(repo=plan.repo_id.split("/")[-1], version=version, variants=", ".join(names))
    description = "Published with publisher as one commit."
    if plan.branch_exists:
        outcome = _commit_reconciled(client, plan, plan.branch, message, description, create_pr)
        _verify(client, plan, outcome.commit)
        return outcome
    if create_pr:
        raise UsageError(f"--create-pr needs branch {plan.branch} to exist on {plan.repo_id}",
                         "push once without --create-pr to create the version branch")
    _remove_stale_staging(client, plan)
    staging = f"{STAGING_PREFIX}{plan.branch}-{int(time.time())}-{secrets.token_hex(3)}"
    cleanup = partial(_try, lambda: client.delete_branch(plan.repo_id, staging))
    removing = None
    own = ThreadPoolExecutor(max_workers=1, thread_name_prefix="publisher-cleanup")  # without `background`
    try:
        # the staging branch is made while the files upload: two round trips (three in a repo this
        # push created, whose main head is read first) that no longer wait for each other
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="publisher-staging") as side:
            started = side.submit(_start_staging, client, plan, staging)
            # asked of main, the ref a publisher writes anyway (the card): the staging branch does not exist yet
            operations = client.upload(plan.repo_id, plan.uploads(), "main")
            plan = replace(plan, parent_commit=started.result())
        outcome = _commit_reconciled(client, plan, staging, message, description, False, operations)
        assert outcome.commit is not None
        _verify(client, plan, outcome.commit)  # before the version branch exists: a bad commit never shows
        # the verified commit is named by its id from here on: the staging branch goes while the
        # version branch is created (a git commit outlives the ref it was made on)
        removing = (background or own).submit(cleanup)
        if not client.create_branch(plan.repo_id, plan.branch, outcome.commit):
            if client.branches(plan.repo_id).get(plan.branch) != outcome.commit:
                raise ConflictError(f"branch {plan.branch} of {plan.repo_id} was created by another push while "
                                    "this one was running; nothing from this push is on it",
                                    "run the push again: it compares with what is there now")
    finally:
        if removing is None:
            cleanup()
        own.shutdown(wait=True)  # waits for the removal when it ran there
    return outcome


def _start_staging(client: HubClient, plan: PushPlan, staging: str) -> str:
    """Create the staging branch at the plan's parent (main's head, read now for a
    repo this push created) and return that commit."""
    parent = plan.parent_commit or client.branches(plan.repo_id).get("main")
    if parent is None:
        raise UsageError(f"{plan.repo_id} has no main branch to start {plan.branch} from")
    client.create_branch(plan.repo_id, staging, parent)
    return parent


def _remove_stale_staging(client: HubClient, plan: PushPlan) -> None:
    """Staging branches of pushes killed more than STAGING_MAX_AGE ago (younger ones may be in use)."""
    for name in plan.branches:
        if name.startswith(STAGING_PREFIX):
            stamp = name.rsplit("-", 2)[-2]
            if stamp.isdigit() and time.time() - int(stamp) > STAGING_MAX_AGE:
                _try(lambda name=name: client.delete_branch(plan.repo_id, name))


def _try(action) -> None:
    """Best-effort cleanup: a staging branch left behind is harmless (`kernels` ignores it)."""
    try:
        action()
    except Exception:  # noqa: BLE001
        pass


def publish_card(client: HubClient, repo_id: str, readme: Path, media: dict[str, Path], create_pr: bool,
                 main: Callable[[], tuple[str, dict[str, RemoteFile]]] | None = None) -> CommitOutcome:
    """README.md (and the plots it shows) on main; the card is ours, so a moved
    main is simply re-read and the card committed on top. `main`: main's head
    and files as the push already read them (a moved main makes that commit
    fail, and main is then read again)."""
    files = [LocalFile.read("README.md", readme)] + [LocalFile.read(p, src) for p, src in sorted(media.items())]
    for attempt in range(1, client.retry.attempts + 1):
        if attempt == 1 and main is not None:
            head, remote = main()
        else:
            head = client.branches(repo_id)["main"]
            remote = client.tree(repo_id, head)
        changed = [f for f in files if not f.matches(remote.get(f.repo_path))]
        if not changed:
            return CommitOutcome(None)
        try:
            result = client.commit(repo_id, "main", [Upload(f.repo_path, str(f.local_path), f.sha256) for f in changed],
                                   "Update kernel card", head, create_pr=create_pr)
            return CommitOutcome(result.oid, result.pr_url)
        except (TransientError, ConflictError):
            if create_pr or attempt == client.retry.attempts:
                raise
            time.sleep(client.retry.wait(attempt))
    raise AssertionError("unreachable")
