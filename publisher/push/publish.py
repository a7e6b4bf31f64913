"""Carry a PushPlan to the Hub as one commit, so the repo never shows a partial
release:

- existing version branch: one create_commit with parent_commit = the head the
  plan was made against; a concurrent push makes it fail (412), not overwrite.
- new version branch: the commit is made on a staging branch (a name `kernels`
  ignores) started at main's head, and only then is `v<N>` created at that
  commit; the version branch appears complete or not at all. The staging branch
  is made while the LFS files upload (they belong to the repo, not to a branch),
  or, by the push stage, while its plan is made.

A commit whose answer was lost (dropped connection, 5xx after it landed) is
recognised by reading the branch back: if it holds exactly this push's files
the commit landed; if it still sits at the parent, the commit is retried; if it
moved elsewhere another push won.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from publisher.errors import ConflictError, TransientError, UsageError, VerificationFailed
from publisher.push.changes import ADD, DELETE, LocalFile, PushPlan, benchmark_files, make_plan
from publisher.push.early import EarlyUpload
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
              sha256: dict[str, dict[str, str] | None] | None = None, records: tuple[LocalFile, ...] = ()) -> PushPlan:
    remote, exists, head = read_branch(client, repo_id, branch, branches, new_repo)
    return make_plan(repo_id, branch, variants, benchmark_files(project_root), remote, not exists, head,
                     sha256, branches, records)


def plan_without_hub(repo_id: str, branch: str, variants: dict[str, Path], project_root: Path,
                     sha256: dict[str, dict[str, str] | None] | None = None,
                     records: tuple[LocalFile, ...] = ()) -> PushPlan:
    """The plan of a dry run that cannot reach the Hub: every file added, nothing compared."""
    return make_plan(repo_id, branch, variants, benchmark_files(project_root), {}, True, None, sha256, records=records)


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
            background: Executor | None = None, early: EarlyUpload | None = None,
            staging: Staging | None = None) -> CommitOutcome:
    """Commit the plan and verify it; raises VerificationFailed when the commit
    does not hold this build (a new version branch is then not created).
    `background` removes the staging branch while the caller goes on (the
    caller waits for it before it is done). `early`: the build's files,
    sent while the plan was made; `staging`: a new version's staging branch,
    started then (removed here, whatever happens)."""
    if plan.is_noop:
        _verify(client, plan, None)
        return CommitOutcome(None)
    names = [g.name for g in plan.groups if g.of(ADD) or g.of(DELETE)]
    message = COMMIT_MESSAGE.format(repo=plan.repo_id.split("/")[-1], version=version, variants=", ".join(names))
    description = "Published with publisher as one commit."
    if plan.branch_exists:
        if early is not None:
            early.wait()  # the commit, asked of this branch, then finds the LFS objects on the Hub
        outcome = _commit_reconciled(client, plan, plan.branch, message, description, create_pr)
        _verify(client, plan, outcome.commit)
        return outcome
    if create_pr:
        raise UsageError(f"--create-pr needs branch {plan.branch} to exist on {plan.repo_id}",
                         "push once without --create-pr to create the version branch")
    _remove_stale_staging(client, plan)
    staging = staging or Staging(client, plan.repo_id, plan.branch, plan.parent_commit)
    removing = None
    own = ThreadPoolExecutor(max_workers=1, thread_name_prefix="publisher-cleanup")  # without `background`
    try:
        # the staging branch is made while the files upload (or, started by the caller, while the plan was
        # made): round trips that do not wait for each other.
        # Asked of main, the ref a publisher writes anyway (the card): the staging branch may not exist yet
        uploads = plan.uploads()
        operations = client.upload(plan.repo_id, uploads, "main", early.operations(uploads) if early else None)
        plan = replace(plan, parent_commit=staging.parent())
        outcome = _commit_reconciled(client, plan, staging.name, message, description, False, operations)
        assert outcome.commit is not None
        _verify(client, plan, outcome.commit)  # before the version branch exists: a bad commit never shows
        # the verified commit is named by its id from here on: the staging branch goes while the
        # version branch is created (a git commit outlives the ref it was made on)
        removing = (background or own).submit(staging.remove)
        if not client.create_branch(plan.repo_id, plan.branch, outcome.commit):
            if client.branches(plan.repo_id).get(plan.branch) != outcome.commit:
                raise ConflictError(f"branch {plan.branch} of {plan.repo_id} was created by another push while "
                                    "this one was running; nothing from this push is on it",
                                    "run the push again: it compares with what is there now")
    finally:
        if removing is None:
            staging.remove()
        own.shutdown(wait=True)  # waits for the removal when it ran there
    return outcome


class Staging:
    """The branch a new version's commit is made on (a name `kernels` ignores), created in the
    background at `parent` (main's head; read first, for a repo this push created)."""

    def __init__(self, client: HubClient, repo_id: str, branch: str, parent: str | None):
        self.name = f"{STAGING_PREFIX}{branch}-{int(time.time())}-{secrets.token_hex(3)}"
        self._client, self._repo_id, self._branch = client, repo_id, branch
        self._removed = False
        self._removing = threading.Lock()  # a second remove() waits for the first
        self._started: Future = Future()
        threading.Thread(target=self._start, args=(parent,), name="publisher-staging", daemon=True).start()

    def _start(self, parent: str | None) -> None:
        try:
            parent = parent or self._client.branches(self._repo_id).get("main")
            if parent is None:
                raise UsageError(f"{self._repo_id} has no main branch to start {self._branch} from")
            self._client.create_branch(self._repo_id, self.name, parent)
            self._started.set_result(parent)
        except BaseException as err:  # noqa: BLE001 - raised by parent()
            self._started.set_exception(err)

    def parent(self) -> str:
        """The commit the staging branch starts at, once it exists (raises what creating it raised)."""
        return self._started.result()

    def remove(self) -> None:
        """Best effort and once (a later call returns when the first is done); waits for the
        creation first, so nothing is left behind."""
        with self._removing:
            if self._removed:
                return
            self._removed = True
            try:
                self._started.result()
            except BaseException:  # noqa: BLE001 - never created
                return
            _try(lambda: self._client.delete_branch(self._repo_id, self.name))


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
